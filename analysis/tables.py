"""Experiment-level analysis over sealed bundles: one item table, accuracy summaries and
the preregistered paired contrasts. Everything is recomputable from bundles + labels."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence

import pandas as pd

from analysis.diagnostics import gold_in_text
from analysis.extraction_effect import walk_positions
from analysis.generation_cost import engine_label
from cmc.evidence import rebuild_text
from cmc.frontends import frontend_kind
from cmc.records import History, Question
from common.errors import DataError
from provenance.bundle import read_bundle_jsonl, read_manifest, verify_seal
from provenance.vault import LabelVault
from scoring.intervals import wilson_interval
from scoring.metrics import normalize_answer, score_output
from scoring.paired import cluster_bootstrap, win_tie_loss

CLUSTER_KEYS: dict[str, Callable[[Question], str]] = {
    # Identical question wording asked of several histories is one query cluster.
    "question_text": lambda q: normalize_answer(q.text),
    "question_id": lambda q: q.qid,
}


def bundle_items(bundle: Path, labels: Mapping[str, tuple[str, ...]], questions: Mapping[str, Question],
                 cluster: str = "question_text", histories: Mapping[str, History] | None = None) -> pd.DataFrame:
    """One row per question of one sealed bundle, scored with the released metric; labels
    come from LabelVault.open(bundle), which has verified the seal. With `histories`, a
    `gold_present` column says whether the evidence the reader saw holds a gold string, and
    `answer_in_evidence` whether it holds the parsed answer (a wrong answer found there is a
    value the reader was shown and chose, not one it made up). `positions` are the records shown,
    `walk` the positions of the edges a traversal view walked (None for other views)."""
    seal = verify_seal(bundle)
    manifest = read_manifest(bundle)
    config, engine = manifest["config"], engine_label(manifest.get("reader_pin") or {})
    evidence = {r["question_id"]: r for r in read_bundle_jsonl(bundle, "evidence.jsonl")}
    rows = []
    for qid, output in question_outputs(bundle, evidence).items():
        question = questions[qid]
        scored = score_output(output["raw"], labels[qid])
        gold = {} if histories is None else evidence_flags(
            rebuild_text(histories[question.history_id], evidence[qid]), labels[qid], scored["parsed"])
        rows.append({
            "arm": config["arm"]["name"], "reader": config["reader"]["name"], "engine": engine,
            "frontend": config["frontend"]["name"], "question_id": qid, "hop": question.hop, "length": question.length,
            "cluster": CLUSTER_KEYS[cluster](question),
            "substring_em": scored["substring_em"], "strict_em": scored["strict_em"], "parsed": scored["parsed"],
            **{key: output[key] for key in ("input_tokens", "truncated", "error")}, "seal": seal, **gold,
            "positions": tuple(sorted(evidence[qid].get("positions", ()))), "walk": walk_positions(evidence[qid]),
            **{key: output[key] for key in ("calls", "output_tokens")},
        })
    return pd.DataFrame(rows)


def question_outputs(bundle: Path, evidence: Mapping[str, dict]) -> dict[str, dict]:
    """Per question, in bundle order: the output to score, reader calls, input and output
    tokens, whether the evidence was cut, and any failure. An arm's question is one call
    (its prediction's output); a multi-call method's is its calls (its trace's answer)."""
    predictions = read_bundle_jsonl(bundle, "predictions.jsonl")
    requests = read_bundle_jsonl(bundle, "requests.jsonl")
    out: dict[str, dict] = {}
    for pred, request in zip(predictions, requests):
        qid = pred["question_id"]
        row = out.setdefault(qid, {"raw": pred["raw"], "calls": 0, "input_tokens": 0, "output_tokens": 0,
                                   "truncated": bool(evidence[qid]["truncated"]), "error": None})
        row["calls"] += 1
        row["input_tokens"] = None if request["input_tokens"] is None or row["input_tokens"] is None \
            else row["input_tokens"] + request["input_tokens"]
        row["output_tokens"] += pred.get("usage", {}).get("completion_tokens", 0)
        # Cut by the evidence budget (characters) or by the reader's input cap (tokens).
        row["truncated"] = row["truncated"] or request["evidence_truncated_tokens"] > 0
        row["error"] = row["error"] or pred["error"]
    for qid, row in out.items():
        if "calls" in evidence[qid]:  # a method: its answer, not its last call's text
            row["raw"] = evidence[qid].get("answer")
        if row["raw"] is not None and not isinstance(row["raw"], str):
            raise DataError(f"{bundle}: question {qid}'s answer is {type(row['raw']).__name__} {row['raw']!r}, "
                            f"not text or null; the bundle was not written by this harness")
    return out


def evidence_flags(text: str, golds: Sequence[str], parsed: str | None) -> dict[str, bool]:
    """Whether the rendered evidence holds a gold string, and whether it holds the parsed answer."""
    return {"gold_present": gold_in_text(text, golds), "answer_in_evidence": gold_in_text(text, [parsed or ""])}


def experiment_items(bundles: Iterable[Path], vault: LabelVault, questions: Mapping[str, Question],
                     cluster: str = "question_text", histories: Mapping[str, History] | None = None) -> pd.DataFrame:
    frames = [bundle_items(b, vault.open(b), questions, cluster, histories) for b in bundles]
    if not frames:
        raise FileNotFoundError("no sealed bundles to score")
    return pd.concat(frames, ignore_index=True)


def accuracy(items: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Substring-EM accuracy (%) with Wilson 95% bounds per group."""
    rows = []
    for key, group in items.groupby(list(by), sort=False):
        correct, n = int(group["substring_em"].sum()), len(group)
        low, high = wilson_interval(correct, n)
        rows.append({**dict(zip(by, key if isinstance(key, tuple) else (key,))), "n": n, "correct": correct,
                     "accuracy": 100 * correct / n, "wilson_low": 100 * low, "wilson_high": 100 * high})
    return pd.DataFrame(rows)


def view_table(items: pd.DataFrame, views: Sequence[str]) -> pd.DataFrame:
    """Table 1's shape: SH and MH accuracy, mean reader-input tokens, truncated contexts
    (evidence cut by the character budget or by the reader's input-token cap)."""
    acc = accuracy(items, ["arm", "hop"]).set_index(["arm", "hop"])
    rows = []
    for arm in views:
        part = items[items["arm"] == arm]
        if part.empty:
            continue
        cell = lambda hop: acc.loc[(arm, hop)] if (arm, hop) in acc.index else None  # noqa: E731
        sh, mh = cell("sh"), cell("mh")
        rows.append({
            "view": arm, "n": len(part),
            "SH": None if sh is None else round(sh["accuracy"], 2),
            "SH 95% CI": None if sh is None else f"[{sh['wilson_low']:.1f}, {sh['wilson_high']:.1f}]",
            "MH": None if mh is None else round(mh["accuracy"], 2),
            "MH 95% CI": None if mh is None else f"[{mh['wilson_low']:.1f}, {mh['wilson_high']:.1f}]",
            "Tokens": round(float(part["input_tokens"].mean()), 1) if part["input_tokens"].notna().all() else None,
            "Trunc.": int(part["truncated"].sum()),
        })
    return pd.DataFrame(rows)


def contrasts(items: pd.DataFrame, pairs: Sequence[Sequence[str]], preregistered: Sequence[Sequence[str]],
              by: str = "hop", n_boot: int = 10_000, seed: int = 0, pooled: bool = False) -> pd.DataFrame:
    """Paired W/T/L and the query-cluster bootstrap of the mean difference (points), for
    each (a, b) pair within each `by` group and, with `pooled`, over all their shared
    questions as the group "all" (appendix B.1 reports its contrasts over the 800); pairs
    not preregistered are marked exploratory."""
    registered = {tuple(p) for p in preregistered}
    rows = []
    for a, b in pairs:
        left = items[items["arm"] == a].set_index("question_id")
        right = items[items["arm"] == b].set_index("question_id")
        shared = left.index.intersection(right.index)
        groups = [(group, [q for q in shared if left.at[q, by] == group]) for group in sorted(left.loc[shared, by].unique())]
        for group, ids in groups + ([("all", list(shared))] if pooled else []):
            x = left.loc[ids, "substring_em"].to_numpy(dtype=float)
            y = right.loc[ids, "substring_em"].to_numpy(dtype=float)
            wtl = win_tie_loss(x, y)
            boot = cluster_bootstrap(100 * (x - y), list(left.loc[ids, "cluster"]), n_boot=n_boot, seed=seed)
            rows.append({"a": a, "b": b, by: group, "n": len(ids), "wins": wtl["wins"], "ties": wtl["ties"],
                         "losses": wtl["losses"], "mean_diff": round(boot["mean"], 2),
                         "ci_low": round(boot["low"], 2), "ci_high": round(boot["high"], 2),
                         "status": "preregistered" if (a, b) in registered else "exploratory"})
    return pd.DataFrame(rows)


def strict_table(items: pd.DataFrame) -> pd.DataFrame:
    """Strict EM next to substring EM (appendix B.3)."""
    return (items.groupby(["arm", "hop"], sort=False)
            .agg(n=("question_id", "size"), substring_em=("substring_em", "mean"), strict_em=("strict_em", "mean"))
            .mul({"n": 1, "substring_em": 100, "strict_em": 100}).round(2).reset_index())


def length_order(values: Iterable[str]) -> list[str]:
    """'6k' < '32k' < '262k'; slices without digits keep their first-seen order."""
    unique = list(dict.fromkeys(values))
    digits = lambda s: int("".join(c for c in s if c.isdigit()) or -1)  # noqa: E731
    return sorted(unique, key=digits)


def selected_keys(packet: dict) -> frozenset[tuple[str, str]]:
    """The (subject, relation) keys a graph read selected, from its evidence trace: the
    prior graph's keys for prior read + refresh, the traversed keys otherwise."""
    edges = packet["trace"].get("prior_edges", packet["trace"].get("edges", []))
    return frozenset((e[0], e[1]) for e in edges)


def key_change_strata(items: pd.DataFrame, changed: Mapping[str, bool], arms: Sequence[str]) -> pd.DataFrame:
    """Table 12: accuracy per arm and hop within questions whose selected key sets differ
    between the two reads (computed from evidence, before scoring) and those that agree."""
    part = items[items["arm"].isin(arms)].copy()
    part["keys_change"] = part["question_id"].map(changed)
    return accuracy(part, ["arm", "hop", "keys_change"]).round(2)


def reader_grid(items: pd.DataFrame, paper: Mapping[str, Any] | None = None) -> pd.DataFrame:
    """Table 2's shape: one row per (reader, engine, frontend), SH / MH accuracy per view. The
    engine is a key, never pooled: one reader name runs as float32 in Table 1 and bfloat16 in
    the LLM-frontend runs, and their answers differ.

    `paper` ({"view", "n", "correct": {frontend kind: count}}) adds, per row, that view's
    correct answers over all its questions beside the paper's count for the same kind of
    frontend (grammar, llm, hybrid: a frontend's name up to its first '_'); the paper states
    Table 7 as counts. A row over another number of questions gets no paper count."""
    keys = ["reader", "engine", "frontend"]
    acc = accuracy(items, [*keys, "arm", "hop"])
    acc["column"] = acc["arm"] + " " + acc["hop"].str.upper()
    grid = acc.pivot_table(index=keys, columns="column", values="accuracy", sort=False)
    grid = grid.round(2).reset_index()
    if paper is None:
        return grid
    view = paper["view"]
    counts = (items[items["arm"] == view].groupby(keys, sort=False)["substring_em"]
              .agg(correct="sum", n="size").reset_index())
    grid = grid.merge(counts.rename(columns={"correct": f"{view} correct"}), on=keys, how="left")
    kind = grid["frontend"].map(frontend_kind)
    grid["paper correct"] = [paper["correct"].get(k) if n == paper["n"] else None for k, n in zip(kind, grid["n"])]
    return grid


def selection_vs_reader(items: pd.DataFrame, views: Sequence[str],
                        reference: Mapping[tuple[str, str], bool] | None = None) -> pd.DataFrame:
    """Per run and hop: how many evidence packets contain a gold string (items built with
    histories, so they carry `gold_present`) and how many answers are right with and without
    one. Separates answers the selection never offered from answers the reader missed in front of it;
    `wrong_with_gold_answer_shown` counts the misses where the wrong answer also stands in the
    evidence (the reader took another value it was shown).

    `reference` ((arm, question_id) -> gold present) is the same views' evidence on the grammar
    frontend's extraction. With it, an LLM frontend's row also separates the extraction: the view
    is held fixed, so a packet that lacks the gold string here but held it on the grammar's
    extraction (`lost_to_extraction`), or the reverse (`gained_by_extraction`), differs because of
    the frontend: what it extracted, the unresolved records it shows as text, and what its empty
    selections fall back to. A view the reference lacks gets no counts, not zeros."""
    if not {"gold_present", "answer_in_evidence"} <= set(items):
        raise ValueError("items lack gold_present / answer_in_evidence: build them with "
                         "experiment_items(..., histories=dataset.histories)")
    part = items.copy()
    part["view_order"] = part["arm"].map({v: i for i, v in enumerate(views)}).fillna(len(views))
    part["hop_order"] = part["hop"].map({"sh": 0, "mh": 1}).fillna(2)
    rows = []
    for (reader, frontend, arm, hop), group in part.sort_values(["view_order", "reader", "frontend", "hop_order"]) \
            .groupby(["reader", "frontend", "arm", "hop"], sort=False):
        held, missing = group[group["gold_present"]], group[~group["gold_present"]]
        row = {
            "reader": reader, "frontend": frontend, "arm": arm, "hop": hop, "n": len(group),
            "correct": int(group["substring_em"].sum()), "gold_in_evidence": len(held),
            "correct_with_gold": int(held["substring_em"].sum()),
            "reader_rate_with_gold": round(100 * held["substring_em"].mean(), 2) if len(held) else float("nan"),
            "correct_without_gold": int(missing["substring_em"].sum()),
            "wrong_with_gold_answer_shown": int((held["answer_in_evidence"] & (held["substring_em"] == 0)).sum()),
        }
        if reference is not None:
            row.update(extraction_counts(group, reference))
        rows.append(row)
    frame = pd.DataFrame(rows)
    counts = [column for column in EXTRACTION_COUNTS if column in frame]  # whole numbers, blank where unknown
    return frame.astype({column: "Int64" for column in counts})


EXTRACTION_COUNTS = ("gold_on_grammar", "lost_to_extraction", "gained_by_extraction")


def extraction_counts(group: pd.DataFrame, reference: Mapping[tuple[str, str], bool]) -> dict[str, int | float]:
    """One run-and-hop group's gold presence against the same view on the grammar's extraction;
    NaN when the reference lacks any of the group's questions (never a partial count)."""
    keys = list(zip(group["arm"], group["question_id"]))
    if not all(key in reference for key in keys):
        return dict.fromkeys(EXTRACTION_COUNTS, float("nan"))
    before = [reference[key] for key in keys]
    after = group["gold_present"].tolist()
    return {"gold_on_grammar": sum(before),
            "lost_to_extraction": sum(b and not a for b, a in zip(before, after)),
            "gained_by_extraction": sum(a and not b for b, a in zip(before, after))}


def markdown(frame: pd.DataFrame) -> str:
    """A table as Markdown with "--" for a missing value: tabulate prints float NaN as "nan"
    whatever `missingval` says, so a frame holding NaN is first made to hold None."""
    if frame.isna().to_numpy().any():
        frame = frame.astype(object).where(frame.notna(), None)
    return frame.to_markdown(index=False, missingval="--")
