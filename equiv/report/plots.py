"""The report's three plots, drawn with matplotlib's Agg canvas into PNG bytes.

``Figure`` + ``FigureCanvasAgg`` are used directly instead of ``pyplot``: no global state, no
GUI backend is ever selected (the report runs on headless CI machines), and each function is a
pure map from runs to PNG bytes that the caller writes to ``plots/*.png`` and inlines in the HTML.
A plot that has no data (pruning by depth without saved trees) returns None; the HTML says why.
"""

from __future__ import annotations

import io
from typing import Sequence

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from equiv.report.load import Run
from equiv.report.stats import CompareRow, pruning_by_depth, shared_ids

DPI = 100
SIZE = (5.2, 3.9)
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"]


def _png(fig: Figure) -> bytes:
    FigureCanvasAgg(fig)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    return buf.getvalue()


def tokens_per_problem(runs: Sequence[Run]) -> bytes:
    """Generated tokens per problem.

    Several runs: each later run against the first (the baseline) on their shared problems, one
    point per problem, with the y = x line; points below it are problems the run (e.g. with
    pruning) solved with fewer tokens. One run: its problems sorted by tokens.
    """
    fig = Figure(figsize=SIZE)
    ax = fig.add_subplot()
    if len(runs) == 1:
        tokens = sorted(r["generated_tokens"] for r in runs[0].results.values())
        ax.bar(range(len(tokens)), tokens, width=1.0, color=COLORS[0])
        ax.set_xlabel("problem (sorted by tokens)")
        ax.set_ylabel("generated tokens")
        ax.set_title(f"Tokens per problem: {runs[0].name}", fontsize=10)
    else:
        ids = shared_ids(runs)
        base = [runs[0].results[pid]["generated_tokens"] for pid in ids]
        top = 1.0
        for i, run in enumerate(runs[1:], start=1):
            other = [run.results[pid]["generated_tokens"] for pid in ids]
            ax.scatter(base, other, s=14, alpha=0.7, color=COLORS[i % len(COLORS)], label=run.name)
            top = max([top, *base, *other])
        ax.plot([0, top], [0, top], color="#888", linewidth=1, linestyle="--", label="y = x")
        ax.set_xlim(0, top * 1.05)
        ax.set_ylim(0, top * 1.05)
        ax.set_xlabel(f"tokens, {runs[0].name} (baseline)")
        ax.set_ylabel("tokens, other run")
        ax.set_title(f"Tokens per problem ({len(ids)} shared problems)", fontsize=10)
        ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return _png(fig)


def pruning_rate_by_depth(runs: Sequence[Run]) -> bytes | None:
    """Share of generated children merged into a sibling, per depth, one line per run with trees."""
    series = [(run, pruning_by_depth(list(run.trees.values()))) for run in runs if run.trees]
    series = [(run, s) for run, s in series if s]
    if not series:
        return None
    fig = Figure(figsize=SIZE)
    ax = fig.add_subplot()
    for run, counts in series:
        depths = list(counts)
        rates = [100.0 * m / t for m, t in counts.values()]
        ax.plot(depths, rates, marker="o", markersize=4, color=COLORS[runs.index(run) % len(COLORS)], label=run.name)
    ax.set_xlabel("depth")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("merged / generated children (%)")
    top = max(100.0 * m / t for _, counts in series for m, t in counts.values())
    ax.set_ylim(0, max(10.0, top * 1.15))  # no 0..0.06 % axis when nothing was merged
    ax.set_title("Pruning rate by depth (saved trees)", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return _png(fig)


def accuracy_vs_tokens(rows: Sequence[CompareRow]) -> bytes:
    """One point per run: mean generated tokens against accuracy, on the shared problems."""
    fig = Figure(figsize=SIZE)
    ax = fig.add_subplot()
    for i, row in enumerate(rows):
        ax.scatter([row.mean_tokens], [row.accuracy], s=50, color=COLORS[i % len(COLORS)], label=row.name, zorder=3)
        ax.annotate(row.name, (row.mean_tokens, row.accuracy), textcoords="offset points", xytext=(6, 6 + 11 * (i % 3)), fontsize=8)
    ax.set_xlabel("mean generated tokens")
    ax.set_ylabel("accuracy (%)")
    n = rows[0].problems if rows else 0
    ax.set_title(f"Accuracy vs tokens ({n} shared problems)", fontsize=10)
    # Accuracy is a percentage: the whole 0-100 range, so two runs at 0 % are not drawn on a
    # -0.06..0.06 axis that makes nothing look like a difference; tokens from 0 for the same reason.
    ax.set_ylim(-5, 105)
    ax.set_xlim(0, max([row.mean_tokens for row in rows] + [1.0]) * 1.3)
    ax.grid(alpha=0.3)
    return _png(fig)
