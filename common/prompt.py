"""Reader prompts as versioned data: the same evidence and question always give the same
messages, and the prompt's hash enters every request identity. A prompt may carry worked
examples, each a finished exchange (a user message and the reply it should get) placed
between the system message and the real request: small models copy a demonstrated reply
far more faithfully than they follow a described one."""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from common.errors import DataError
from common.io import canonical_json, sha256_text

PROMPT_DIR = Path(__file__).parent / "prompts"


@dataclass(frozen=True)
class Prompt:
    name: str
    system: str
    query: str  # holds the literal placeholder {question}
    joiner: str  # between evidence and query, inside one user message
    examples: tuple[tuple[str, str], ...] = ()  # worked exchanges: (user message, assistant reply)

    @property
    def version(self) -> str:
        """Content hash: any edit to the wording is a new prompt version (a prompt without
        examples hashes as it did before examples existed)."""
        parts: list = [self.system, self.query, self.joiner]
        return sha256_text(canonical_json(parts + [[list(e) for e in self.examples]] if self.examples else parts))[:16]

    def messages(self, evidence: str, question: str) -> list[dict[str, str]]:
        """MemoryAgentBench's contract: system prompt, then evidence + joiner + query as one
        user message. The question is substituted literally (str.replace), as released. The
        worked examples, if any, come between the two as user/assistant turns."""
        user = evidence + self.joiner + self.query.replace("{question}", question)
        shown = [{"role": role, "content": text} for example in self.examples
                 for role, text in zip(("user", "assistant"), example)]
        return [{"role": "system", "content": self.system}, *shown, {"role": "user", "content": user}]


def load_prompt(name: str) -> Prompt:
    path = PROMPT_DIR / f"{name}.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        examples = tuple(_example(item) for item in data.get("examples", ()))
        prompt = Prompt(data["name"], data["system"], data["query"], data["joiner"], examples)
    except (OSError, json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise DataError(f"{path}: cannot load prompt {name!r}: {exc}") from exc
    if "{question}" not in prompt.query:
        raise DataError(f"{path}: query has no {{question}} placeholder")
    return prompt


def _example(item: object) -> tuple[str, str]:
    """One worked example: {"user": ..., "assistant": ...}, both non-empty strings."""
    if not (isinstance(item, dict) and set(item) == {"user", "assistant"}
            and all(isinstance(v, str) and v.strip() for v in item.values())):
        raise ValueError(f"an example must be {{\"user\": text, \"assistant\": text}}, got {item!r}")
    return item["user"], item["assistant"]
