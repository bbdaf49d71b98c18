"""The generation service: the one place a request is generated, with the crash-safe
prediction store, the committable journal, sittings (wall-clock cost), run locks, and the
calls an LLM extraction makes through it. It knows readers only by the contract in
`common.calls`, never an engine or the method."""
