"""`cmc-harness token-match`: the disjoint-random control's token matching, measured as the reader counts: per question,
the reader tokenizer's length of the rendered disjoint-random evidence minus that of CMC's
(paper B.1: mean absolute delta 0.005 tokens, max 2). Label-free: only evidence is read.

    cmc-harness token-match [reader=...] [population=...]

Writes <paths.results_dir>/tables/disjoint_token_match[_<population>][_<reader>].{csv,md}.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from analysis.tables import length_order, markdown
from cmc.evidence import rebuild_text
from common.configurable import instantiate_known
from common.errors import DataError
from common.io import atomic_write_text
from harness.config import compose
from harness.runs import Run


def deltas(overrides: list[str]) -> tuple[pd.DataFrame, str, str]:
    """One row per question: CMC's and the control's evidence tokens, the delta, and the
    delta the swap search aimed at (its trace's sums of per-record sizes)."""
    control = Run(compose("arm=disjoint_random", *overrides))
    reference = Run(compose("arm=cmc", *overrides))
    arm = instantiate_known(control.cfg.arm)
    if arm.counter is None:
        raise DataError(f"reader {control.cfg.reader.name} has no tokenizer: the control matches whitespace tokens")
    tokenizer = arm.counter.tokenizer
    rows = []
    for question, ours, theirs in zip(control.questions, control.packets(), reference.packets()):
        history = control.dataset.histories[question.history_id]
        count = lambda packet: len(tokenizer(rebuild_text(history, packet), add_special_tokens=False)["input_ids"])  # noqa: E731
        control_tokens, cmc_tokens = count(ours), count(theirs)
        rows.append({"question_id": question.qid, "hop": question.hop, "length": question.length,
                     "cmc_tokens": cmc_tokens, "control_tokens": control_tokens,
                     "delta": control_tokens - cmc_tokens,
                     "search_delta": ours["trace"]["tokens"] - ours["trace"]["target_tokens"]})
    return pd.DataFrame(rows), control.cfg.reader.name, control.cfg.population.name


def summary(frame: pd.DataFrame) -> pd.DataFrame:
    """Mean and max absolute delta per hop x length cell and pooled."""
    def row(name: dict, part: pd.DataFrame) -> dict:
        return {**name, "n": len(part), "mean_abs_delta": round(float(part["delta"].abs().mean()), 3),
                "max_abs_delta": int(part["delta"].abs().max()), "mean_delta": round(float(part["delta"].mean()), 3),
                "exact": int((part["delta"] == 0).sum()),
                "search_mean_abs_delta": round(float(part["search_delta"].abs().mean()), 3)}
    rows = [row({"hop": hop, "length": length}, frame[(frame["hop"] == hop) & (frame["length"] == length)])
            for hop in ("sh", "mh") for length in length_order(frame["length"])
            if ((frame["hop"] == hop) & (frame["length"] == length)).any()]
    return pd.DataFrame([*rows, row({"hop": "all", "length": "all"}, frame)])


def token_match_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("overrides", nargs="*", help="config overrides for both runs (reader=..., population=...)")


def token_match_main(args: argparse.Namespace) -> int:
    """Measure, summarise and write the table; its name carries what differs from the defaults."""
    frame, reader, population = deltas(args.overrides)
    table = summary(frame)
    default, used = compose(), compose(*args.overrides)
    suffix = "".join(f"_{value}" for value, usual in ((population, default.population.name),
                                                      (reader, default.reader.name)) if value != usual)
    stem = Path(used.paths.results_dir) / "tables" / f"disjoint_token_match{suffix}"
    atomic_write_text(stem.with_suffix(".csv"), table.to_csv(index=False))
    atomic_write_text(stem.with_suffix(".md"), (
        f"## Disjoint random: token matching in the reader's tokens\n\nReader tokenizer: {reader}. Per question, "
        f"tokens of the rendered control evidence minus CMC's (header included in both); `search_mean_abs_delta` "
        f"is what the swap search saw (sums of per-record sizes). Paper B.1: mean absolute delta 0.005, max 2.\n\n"
        f"{markdown(table)}\n"))
    print(markdown(table))
    return 0

