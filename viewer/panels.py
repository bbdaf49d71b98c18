"""One bundle's answer to one question, as the question page shows it: anchors, the
traversal graph, the evidence records rebuilt from the history (checked against the
packet's text hash), the reader input, the raw and parsed output, and the gold strings."""
from __future__ import annotations

from typing import Any, Mapping

from analysis.retrieval_curves import first_gold_rank, ranking, selected_records
from cmc.evidence import rebuild_text
from cmc.graph import Memory
from cmc.records import Question
from common.errors import DataError
from scoring.metrics import parse_answer, score_output
from viewer.highlight import segments
from viewer.load import ViewedBundle
from viewer.traversal_svg import Alternate, parse_edges, traversal_graph

OPEN_RECORDS = 60  # evidence lists longer than this start folded


def panel(bundle: ViewedBundle, question: Question, reference: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Everything one panel of a question page shows (plain values; the template escapes).
    `reference` is the other bundle's packet when it is a graph read, so a ranked arm's
    panel can say at which ranks the graph read's records sit."""
    qid = question.qid
    packet, request = bundle.evidence[qid], bundle.requests[qid]
    prediction = bundle.prediction(qid)
    golds = bundle.labels[qid] if bundle.labels is not None else None
    raw = prediction["raw"]
    calls = method_calls(bundle, packet, golds)
    if calls is not None:  # a multi-call method: its answer is its trace's, its input all its calls'
        raw = packet["answer"]
        request = {**request, "input_tokens": sum(c["input_tokens"] or 0 for c in calls)}
    history = bundle.dataset.histories[question.history_id]
    out: dict[str, Any] = {
        "bundle": bundle.name, "arm": bundle.arm, "reader": bundle.reader,
        "anchors": packet["trace"].get("anchors"), "fallback": packet["trace"].get("fallback"),
        "chars": packet["chars"], "truncated": packet["truncated"], "dropped": packet["trace"].get("dropped", 0),
        "input_tokens": request["input_tokens"], "token_cut": request["evidence_truncated_tokens"],
        "raw": segments(raw, golds) if raw is not None else None, "error": prediction.get("error"),
        "finish": prediction.get("finish_reason") if calls is None else "the method's answer, from its trace",
        "parsed": segments(parse_answer(raw), golds) if raw is not None else None,
        "golds": list(golds) if golds is not None else None, "calls": calls,
        "method_trace": packet["trace"] if calls is not None else None,
        **records(history, packet, golds), **traversal(bundle, question, packet),
    }
    if golds is not None:
        scored = score_output(raw, golds)
        out.update(correct=bool(scored["substring_em"]), strict=bool(scored["strict_em"]))
    ranked = ranking(packet, f"{bundle.name}/evidence.jsonl: {qid}")
    if ranked is not None:
        out["ranked"] = len(ranked)
        out["gold_rank"] = first_gold_rank(history, ranked, golds) if golds is not None else None
        if reference is not None:
            at = {pos: rank for rank, pos in enumerate(ranked, start=1)}
            out["reference_ranks"] = [(pos, at.get(pos)) for pos in selected_records(reference)]
    return out


def method_calls(bundle: ViewedBundle, packet: Mapping[str, Any], golds: Any) -> list[dict[str, Any]] | None:
    """A method's calls in order (step, output, tokens); None for an arm's one call."""
    if "calls" not in packet:
        return None
    outputs = {row["request_id"]: row for row in bundle.predictions}
    requests = {row["request_id"]: row for row in bundle.request_rows}
    return [{"step": call["step"], "raw": segments(outputs[call["request_id"]]["raw"] or "", golds),
             "input_tokens": requests[call["request_id"]]["input_tokens"]} for call in packet["calls"]]


def records(history: Any, packet: Mapping[str, Any], golds: Any) -> dict[str, Any]:
    """The numbered records the reader saw, rebuilt and checked against the packet's hash;
    a mismatch is shown on the page (the records are then not listed)."""
    try:
        rebuild_text(history, packet)
    except DataError as exc:
        return {"records": [], "records_error": str(exc), "records_open": False}
    rows = []
    for pos in packet["positions"]:
        text = history.record(pos).text
        cut = segments(text, golds)
        rows.append({"pos": pos, "text": cut, "gold": any(s.marked for s in cut)})
    return {"records": rows, "records_error": None, "records_open": len(rows) <= OPEN_RECORDS,
            "header": history.header}


def traversal(bundle: ViewedBundle, question: Question, packet: Mapping[str, Any]) -> dict[str, Any]:
    """The drawn graph and its edge table. Stale closure draws CMC's traversal plus the stale
    value each substituted key showed instead; prior read + refresh draws its prior-graph
    traversal plus the current value each changed key was refreshed to."""
    trace, where = packet["trace"], f"{bundle.name}/evidence.jsonl: {question.qid}"
    key = "prior_edges" if "prior_edges" in trace else "edges" if "edges" in trace else None
    if key is None:
        return {"graph": None, "edges": []}
    edges = parse_edges(trace[key], where)
    memory = bundle.memory(question.history_id)
    alternates = stale_values(trace, memory, where) if "substitutions" in trace else \
        refreshed_values(edges, memory) if key == "prior_edges" else []
    marks = {(a.subject, a.relation): a for a in alternates}
    table = [{"depth": d, "subject": s, "relation": r, "object": o, "pos": p, "alternate": marks.get((s, r))}
             for s, r, o, p, d in edges]
    anchors = trace.get("anchors") or []
    return {"graph": traversal_graph(anchors, edges, alternates), "edges": table, "graph_kind": key}


def stale_values(trace: Mapping[str, Any], memory: Memory | None, where: str) -> list[Alternate]:
    """[subject, relation, current pos, stale pos] -> the stale value from the version chain
    (recompiled memory); without one, the value is named by its record."""
    out = []
    for item in trace["substitutions"]:
        if not (isinstance(item, list) and len(item) == 4 and all(isinstance(x, str) for x in item[:2])
                and all(isinstance(x, int) for x in item[2:])):
            raise DataError(f"{where}: trace substitution is not [subject, relation, pos, stale pos]: {str(item)[:80]}")
        subject, relation, _, stale = item
        chain = memory.chains.get((subject, relation), []) if memory is not None else []
        value = next((e.object for e in chain if e.pos == stale), f"record {stale}")
        out.append(Alternate(subject, relation, value, stale, "stale"))
    return out


def refreshed_values(edges: list[tuple[str, str, str, int, int]], memory: Memory | None) -> list[Alternate]:
    if memory is None:
        return []
    out = []
    for subject, relation, _, pos, _ in edges:
        current = memory.current.edges.get((subject, relation))
        if current is not None and current.pos != pos:
            out.append(Alternate(subject, relation, current.object, current.pos, "refreshed"))
    return out
