"""Benchmark figures: measured series, ceilings drawn as lines, references labelled as such."""
from __future__ import annotations

import numpy as np

from ..results import store
from .figures import PALETTE

# Okabe-Ito colours by role, so every chapter's figures read the same way.
OURS, BASELINE, ALTERNATIVE, REFERENCE, CEILING = PALETTE[4], PALETTE[5], PALETTE[2], PALETTE[7], "black"


def _label_gpu(result) -> str:
    return f"{result['gpu']}, {result.get('date', '?')}"


def bandwidth(result, series, *, x="N", ax=None, title=None):
    """Plot GB/s against ``x`` for each (column, label, colour) in ``series``, with the copy ceiling."""
    import matplotlib.pyplot as plt
    ax = ax or plt.subplots(figsize=(7.5, 4.2))[1]
    xs = np.array(store.column(result, x), dtype=float)
    order = np.argsort(xs)
    markers = "os^vD"
    for i, (col, label, colour) in enumerate(series):
        ys = np.array([np.nan if v is None else v for v in store.column(result, col)], dtype=float)
        ax.plot(xs[order], ys[order], marker=markers[i % len(markers)], color=colour, label=label)
    ceiling = result["ceilings"]["copy_gbps"]
    ax.axhline(ceiling, color=CEILING, lw=1, ls="--")
    ax.text(xs.min(), ceiling * 1.01, f"copy ceiling {ceiling:.0f} GB/s (same run)", fontsize=8, va="bottom")
    ax.axhline(0.9 * ceiling, color=CEILING, lw=0.6, ls=":")
    ax.text(xs.max(), 0.9 * ceiling * 0.99, "0.90 of copy", fontsize=7, va="top", ha="right")
    ax.set_xscale("log", base=2)
    ax.set_xlabel(f"{x} (row length, elements)" if x == "N" else x)
    ax.set_ylabel("bandwidth (GB/s, bytes read + written)")
    ax.set_ylim(0, ceiling * 1.12)
    ax.grid(alpha=0.3)
    ax.set_title(title or f"measured on {_label_gpu(result)}", fontsize=10)
    ax.legend(fontsize=8, loc="lower left")
    return ax


def fraction_of_ceiling(result, series, *, x="N", ax=None, target=None, title=None):
    """The same runs as fractions of the copy ceiling, with an optional target line."""
    import matplotlib.pyplot as plt
    ax = ax or plt.subplots(figsize=(7.5, 3.6))[1]
    xs = np.array(store.column(result, x), dtype=float)
    o = np.argsort(xs)
    ceiling = result["ceilings"]["copy_gbps"]
    for i, (col, label, colour) in enumerate(series):
        ys = np.array([np.nan if v is None else v for v in store.column(result, col)], dtype=float) / ceiling
        ax.plot(xs[o], ys[o], marker="os^vD"[i % 5], color=colour, label=label)
    ax.axhline(1.0, color=CEILING, lw=1, ls="--", label="copy ceiling")
    if target:
        ax.axhline(target, color=CEILING, lw=0.6, ls=":", label=f"target {target:.2f}")
    ax.set_xscale("log", base=2)
    ax.set_xlabel(f"{x} (row length, elements)" if x == "N" else x)
    ax.set_ylabel("fraction of copy bandwidth")
    ax.set_ylim(0, 1.08)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower left")
    ax.set_title(title or f"measured on {_label_gpu(result)}", fontsize=10)
    return ax


def reference(ref, column, *, x="N", ax=None, label=None):
    """A third-party result, in its own axes, titled with its GPU and its source: never mixed
    into the axes of this project's measurements."""
    import matplotlib.pyplot as plt
    ax = ax or plt.subplots(figsize=(5, 4.2))[1]
    rx = np.array(store.column(ref, x), dtype=float)
    ry = np.array(store.column(ref, column), dtype=float)
    o = np.argsort(rx)
    ax.plot(rx[o], ry[o], ls="--", marker="x", color=REFERENCE, label=label or column)
    ax.set_xscale("log", base=2)
    ax.set_xlabel(f"{x} (row length, elements)" if x == "N" else x)
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower left")
    import textwrap
    ax.set_title(textwrap.fill(f"REFERENCE, not measured here: {ref['gpu']}", 90) + "\n"
                 + textwrap.fill(f"source: {ref['source'].split(';')[0]}", 90),
                 fontsize=8)
    return ax


def latency(result, *, x="num_ctas", y="ns_per_round", by="what", ax=None, title=None):
    """Cost per round (ns) against cluster size, one line per kind of hand-off."""
    import matplotlib.pyplot as plt
    ax = ax or plt.subplots(figsize=(7, 3.8))[1]
    recs = store.records(result)
    for i, kind in enumerate(dict.fromkeys(r[by] for r in recs)):
        pts = sorted((r[x], r[y]) for r in recs if r[by] == kind)
        ax.plot(*zip(*pts), marker=SERIES_MARKERS[i % len(SERIES_MARKERS)], ls=SERIES_LINES[i % len(SERIES_LINES)],
                color=SERIES_COLOURS[i % len(SERIES_COLOURS)], label=kind)
    _cost_axes(ax, title or f"measured on {_label_gpu(result)}")
    return ax


# Up to seven series per panel told apart by colour, marker and line style together (Okabe-Ito colours).
SERIES_COLOURS = [PALETTE[i] for i in (4, 5, 2, 0, 6, 1, 7)]
SERIES_MARKERS = "os^vDPX"
SERIES_LINES = ["-", "--", "-.", ":", "-", "--", "-."]


def _cost_axes(ax, title):
    ax.set_xscale("log", base=2)
    ax.set_xlabel("CTAs per cluster")
    ax.set_ylabel("cost per round (ns)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title, fontsize=10)


def latency_before_after(before, after, pairs, *, x="num_ctas", y="ns_per_round", ax=None, title=None):
    """The same benchmark recorded before and after a change: for each (mode before, mode after, label) of
    ``pairs``, the ``before`` result dashed with open markers and the ``after`` one solid."""
    import matplotlib.pyplot as plt
    ax = ax or plt.subplots(figsize=(7, 3.8))[1]
    for i, (m_old, m_new, label) in enumerate(pairs):
        colour, marker = SERIES_COLOURS[i % len(SERIES_COLOURS)], SERIES_MARKERS[i % len(SERIES_MARKERS)]
        for res, mode, style, when in ((before, m_old, "--", "before"), (after, m_new, "-", "after")):
            pts = sorted((r[x], r[y]) for r in store.records(res) if r["mode"] == mode)
            ax.plot(*zip(*pts), ls=style, marker=marker, color=colour, mfc="white" if when == "before" else colour,
                    label=f"{label}, {when}")
    _cost_axes(ax, title or f"before and after, measured on {_label_gpu(after)}")
    return ax


def matmul(result, series, *, x="K", ax=None, ceilings=(), table=None, title=None):
    """TFLOP/s against ``x`` (log 2) for each (column, label, colour) in ``series``; ``ceilings`` are
    (value, label) pairs drawn as dashed lines. ``table`` picks a sub-table of ``result["tables"]``."""
    import matplotlib.pyplot as plt
    ax = ax or plt.subplots(figsize=(7.5, 4.4))[1]
    src = result["tables"][table] if table else result
    xs = np.array(store.column(src, x), dtype=float)
    o = np.argsort(xs)
    for i, (col, label, colour) in enumerate(series):
        ys = np.array(store.column(src, col), dtype=float)
        ax.plot(xs[o], ys[o], marker="os^vDPX"[i % 7], color=colour, label=label,
                ls="--" if col in ("cublas_tflops", "torch_tflops") else "-")
    top = 0.0
    for value, label in ceilings:
        ax.axhline(value, color=CEILING, lw=1, ls="--")
        ax.text(xs.min(), value * 1.01, label, fontsize=8, va="bottom")
        top = max(top, value)
    ax.set_xscale("log", base=2)
    ax.set_xticks(xs[o], [str(int(v)) for v in xs[o]])
    ax.set_xlabel(f"{x} (reduction length)" if x == "K" else x)
    ax.set_ylabel("TFLOP/s (2MNK / time)")
    ax.set_ylim(0, max(top * 1.08, ax.get_ylim()[1]))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    ax.set_title(title or f"measured on {_label_gpu(result)}", fontsize=10)
    return ax
