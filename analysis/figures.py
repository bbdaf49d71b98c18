"""Figures from the experiment item table (matplotlib, headless Agg backend)."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402

from analysis.tables import accuracy, length_order  # noqa: E402
from common.io import writable_dir  # noqa: E402

HOP_TITLES = {"sh": "single-hop", "mh": "multi-hop"}


def _save(fig: plt.Figure, path: Path) -> Path:
    writable_dir(path.parent)
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=150, bbox_inches="tight")
    plt.close(fig)
    tmp.replace(path)
    return path


def token_slices(lengths: Iterable[str]) -> bool:
    """Whether a dataset's slices are history lengths in tokens ("6k", "32k"), the axis of
    the by-length figure; the synthetic sweep's "d3u050" cells are not (it has its own)."""
    return all(re.fullmatch(r"\d+k", str(v)) for v in lengths)


def accuracy_by_length(items: pd.DataFrame, arms: Sequence[str], path: Path, caption: str) -> Path:
    """Figure 2: substring-EM accuracy per history length, one line per arm, one panel per hop."""
    lengths = length_order(items["length"])
    acc = accuracy(items[items["arm"].isin(arms)], ["arm", "hop", "length"])
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    dodge = 0.25 / max(len(arms), 1)  # side-by-side offsets keep tied series visible
    for ax, hop in zip(axes, ("sh", "mh")):
        for i, arm in enumerate(arms):
            part = acc[(acc["arm"] == arm) & (acc["hop"] == hop)].set_index("length").reindex(lengths)
            if part["accuracy"].notna().any():
                x = [j + (i - (len(arms) - 1) / 2) * dodge for j in range(len(lengths))]
                ax.errorbar(x, part["accuracy"],
                            yerr=[part["accuracy"] - part["wilson_low"], part["wilson_high"] - part["accuracy"]],
                            marker="o", capsize=3, label=arm)
        ax.set_xticks(range(len(lengths)), lengths)
        ax.set_xlabel("history length (tokens)")
        ax.set_title(HOP_TITLES[hop])
        ax.set_ylim(-2, 102)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("substring exact match (%)")
    axes[1].legend(loc="best", fontsize=8)
    fig.suptitle(caption, fontsize=9)
    return _save(fig, path)


def accuracy_vs_tokens(items: pd.DataFrame, arms: Sequence[str], path: Path, caption: str) -> Path:
    """Figure 3: accuracy against mean reader-input tokens per arm (matched-length view);
    colour is the arm, marker the hop class, tokens on a log axis."""
    fig, ax = plt.subplots(figsize=(7, 4))
    colors = {arm: f"C{i}" for i, arm in enumerate(arms)}
    markers = {"sh": "o", "mh": "s"}
    for hop, marker in markers.items():
        for arm in arms:
            part = items[(items["arm"] == arm) & (items["hop"] == hop)]
            if not part.empty:
                ax.scatter(part["input_tokens"].mean(), 100 * part["substring_em"].mean(), marker=marker, s=60,
                           color=colors[arm], alpha=0.8)
    handles = [Line2D([], [], color=c, marker="o", linestyle="", label=a) for a, c in colors.items()]
    handles += [Line2D([], [], color="gray", marker=m, linestyle="", label=HOP_TITLES[h]) for h, m in markers.items()]
    ax.legend(handles=handles, fontsize=7, loc="center left", bbox_to_anchor=(1.01, 0.5))
    ax.set_xscale("log")
    ax.set_xlabel("mean reader-input tokens, log scale (chat template included)")
    ax.set_ylabel("substring exact match (%)")
    ax.set_ylim(-2, 102)
    ax.grid(alpha=0.3)
    ax.set_title(caption, fontsize=9)
    return _save(fig, path)


def depth_curve(items: pd.DataFrame, arms_by_depth: dict[int, str], path: Path, caption: str) -> Path:
    """Appendix H: accuracy against the traversal depth cap, one line per hop class."""
    fig, ax = plt.subplots(figsize=(5, 4))
    depths = sorted(arms_by_depth)
    for hop in ("sh", "mh"):
        values = []
        for depth in depths:
            part = items[(items["arm"] == arms_by_depth[depth]) & (items["hop"] == hop)]
            values.append(100 * part["substring_em"].mean() if len(part) else float("nan"))
        ax.plot(depths, values, marker="o", label=HOP_TITLES[hop])
    ax.set_xticks(depths)
    ax.set_xlabel("traversal depth cap (hops)")
    ax.set_ylabel("substring exact match (%)")
    ax.set_ylim(-2, 102)
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title(caption, fontsize=9)
    return _save(fig, path)



def sweep_figure(table: pd.DataFrame, path: Path, max_hops: int, caption: str) -> Path:
    """The synthetic sweep: evidence recall (top) and reader accuracy (bottom) against hop
    depth, one panel per update rate, one line per arm; depths past CMC's cap are shaded."""
    rates = sorted(table["update_rate"].unique())
    arms = list(dict.fromkeys(table["arm"]))
    fig, axes = plt.subplots(2, len(rates), figsize=(4 * len(rates), 7), sharex=True, sharey=True, squeeze=False)
    depths = sorted(table["depth"].unique())
    for col, rate in enumerate(rates):
        for row, (metric, label) in enumerate((("recall", "evidence recall (%)"), ("accuracy", "accuracy (%)"))):
            ax = axes[row][col]
            for i, arm in enumerate(arms):
                part = table[(table["arm"] == arm) & (table["update_rate"] == rate)].sort_values("depth")
                ax.plot(part["depth"] + (i - (len(arms) - 1) / 2) * 0.06, part[metric], marker="o", label=arm,
                        color=f"C{i}", linestyle="--" if arm.startswith("cmc_") else "-")
            if depths[-1] > max_hops:
                ax.axvspan(max_hops + 0.5, depths[-1] + 0.5, color="gray", alpha=0.15, lw=0)
            ax.set_xticks(depths)
            ax.set_ylim(-3, 103)
            ax.grid(alpha=0.3)
            if row == 0:
                ax.set_title(f"update rate {rate:g}")
            else:
                ax.set_xlabel("question hop depth")
            if col == 0:
                ax.set_ylabel(label)
    axes[0][0].legend(fontsize=7, loc="lower left")
    fig.suptitle(f"{caption}\nshaded: depth beyond CMC's max_hops = {max_hops}", fontsize=9)
    return _save(fig, path)
