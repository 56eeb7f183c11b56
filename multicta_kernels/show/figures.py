"""Every drawing of the book that is not a benchmark plot, in one palette: ownership maps of a layout, barrier
groups, multicast receivers, tile orders, a 2-CTA pair's operands and measured timelines (Gantt charts).

=================  =====================================================================
``ownership_map``  one owner field (CTA, warp, lane, register) of a tensor, as a heatmap
``layout_maps``    a layout's ownership maps side by side (from Triton's own views)
``barrier_groups``  CTAs coloured by the mbarrier they share, leaders starred (chapter 2)
``receivers``      CTAs by the C tile they own, with the A and B tiles they need (chapter 3)
``cta_pair``       what each CTA of a 2-CTA pair holds for one MMA (chapter 4)
``tile_order``     the tile grid labelled with the program id that computes each tile
``gantt``          a measured timeline, a row per warp or partition (``scope_colours``)
=================  =====================================================================
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from ..core import layouts
from ..core import validate

if TYPE_CHECKING:
    from ..measure.traces import Trace


# Okabe-Ito, the colour-blind-safe qualitative palette, extended with lighter tints for 16 CTAs.
PALETTE = ["#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7", "#999999",
           "#F5C76B", "#A6D6F2", "#66C5AB", "#F7EF94", "#6AA6D1", "#E79A66", "#E0AFCB", "#CCCCCC"]


def ownership_map(own, by: str = "cta", ax=None, title: str | None = None, annotate: bool | None = None,
         columns: tuple | None = None):
    """Heatmap of one owner field ("cta", "warp", "lane", "reg") of a 1-D or 2-D tensor.

    ``columns=(lo, hi)`` zooms into a range of columns; a colour key is drawn beside the map.
    """
    import matplotlib.pyplot as plt
    from matplotlib.colors import BoundaryNorm, ListedColormap

    data = getattr(own, by)
    holding = own.ctas_holding
    if data.ndim == 1:
        data, holding = data[None, :], holding[None, :]
    if data.ndim != 2:
        raise ValueError(f"can draw 1-D and 2-D tensors, not shape {own.shape}")
    if (data < 0).all():
        raise ValueError(f"this layout has no {by!r} owners (shared memory has CTAs and offsets only)")
    lo, hi = columns or (0, data.shape[1])
    data, holding = data[:, lo:hi], holding[:, lo:hi]
    ax = ax or plt.subplots(figsize=(min(12, 1 + data.shape[1] * 0.45), min(8, 1 + data.shape[0] * 0.45)))[1]
    k = int(data.max()) + 1
    categorical = k <= len(PALETTE)
    if categorical:
        cmap = ListedColormap(PALETTE[:k])
        norm = BoundaryNorm(np.arange(-0.5, k + 0.5), k)
    else:
        cmap, norm = plt.get_cmap("cividis"), None
    im = ax.imshow(data, cmap=cmap, norm=norm, aspect="auto", interpolation="nearest",
                   extent=(lo - 0.5, hi - 0.5, data.shape[0] - 0.5, -0.5))
    cbar = plt.colorbar(im, ax=ax, fraction=0.05, pad=0.02,
                        ticks=range(k) if categorical and k <= 16 else None)
    cbar.set_label(by, fontsize=8)
    cbar.ax.tick_params(labelsize=7)
    if annotate is None:
        annotate = data.size <= 512
    if annotate:
        for (i, j), v in np.ndenumerate(data):
            label = f"{v}" + ("*" if by == "cta" and holding[i, j] > 1 else "")
            ax.text(lo + j, i, label, ha="center", va="center", fontsize=7)
    ax.set_xlabel("column (dim 1)" if len(own.shape) == 2 else "element")
    from matplotlib.ticker import MaxNLocator
    ax.xaxis.set_major_locator(MaxNLocator(nbins=8, integer=True))          # rows and columns are integers
    if data.shape[0] == 1:
        ax.set_yticks([])
    else:
        ax.yaxis.set_major_locator(MaxNLocator(nbins=8, integer=True))
        ax.set_ylabel("row (dim 0)")
    ax.set_title(title or f"owner: {by}", fontsize=10)
    return ax


def layout_maps(layout, shape, fields=("cta", "warp", "lane", "reg"), title: str | None = None, zoom: dict | None = None):
    """Draw a layout's ownership maps side by side: try it with your own layout.

    ``zoom`` maps a field to a ``(lo, hi)`` column range drawn for that field only.

    >>> layout_maps(gl.BlockedLayout([1, 4], [4, 8], [2, 2], [1, 0], cga_layout=[[1, 0]]), [16, 32])
    """
    import matplotlib.pyplot as plt

    own = layouts.ownership(layout, shape)
    zoom = zoom or {}
    fields = [f for f in fields if not (getattr(own, f) < 0).all()]
    # at most two maps a row: the figure stays about as wide as the page (9 in), so its ticks read at 1:1
    ncols = 1 if len(fields) == 1 else 2
    nrows = -(-len(fields) // ncols)
    height = 3.4 if len(shape) == 2 and shape[0] > 1 else 2.0
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.6 * ncols, height * nrows + 0.4), squeeze=False)
    for ax in axes.flat[len(fields):]:
        ax.set_visible(False)
    for ax, f in zip(axes.flat, fields):
        cols = zoom.get(f)
        ownership_map(own, f, ax=ax, annotate=False if own.cta.size > 256 else None, columns=cols,
             title=f"owner: {f}" + (f" (columns {cols[0]}-{cols[1] - 1})" if cols else ""))
    fig.suptitle(title or type(layout).__name__, fontsize=10)
    fig.tight_layout()
    return fig


def barrier_groups(model, ax=None, title: str | None = None):
    """CTAs as boxes coloured by the barrier they share; the leader of each group is starred."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyBboxPatch

    ax = ax or plt.subplots(figsize=(0.8 * model.num_ctas + 1, 1.6))[1]
    for c in range(model.num_ctas):
        b = model.barrier_of(c)
        ax.add_patch(FancyBboxPatch((c + 0.08, 0.1), 0.84, 0.8, boxstyle="round,pad=0.02",
                                    facecolor=PALETTE[b % len(PALETTE)], edgecolor="black", lw=0.6))
        leader = model.leader(c) == c
        ax.text(c + 0.5, 0.62, f"CTA {c}", ha="center", va="center", fontsize=8, weight="bold" if leader else None)
        ax.text(c + 0.5, 0.32, ("* " if leader else "") + f"bar {b}", ha="center", va="center", fontsize=7)
    ax.set_xlim(0, model.num_ctas)
    ax.set_ylim(0, 1)
    ax.axis("off")
    bases = [list(b) for b in model.bases]
    ax.set_title(title or f"cga_layout={bases}: {model.num_barriers} barrier(s), groups of "
                          f"{model.group_size} (* = leader)", fontsize=9)
    return ax


def receivers(acc_bases, two_ctas=False, ax=None):
    """CTAs laid out by the C tile they own; each labelled with the A and B tile it needs."""
    import matplotlib.pyplot as plt
    from ..gluon.operands import operand_cga_layouts
    from ..multicast import receivers, tile_of
    a_b, b_b = operand_cga_layouts(acc_bases, two_ctas)
    n = 1 << len(acc_bases)
    ax = ax or plt.subplots(figsize=(3, 3))[1]
    c_tiles = {c: tile_of([tuple(b) for b in acc_bases], c) for c in range(n)}
    a_groups = {t: i for i, t in enumerate(receivers(a_b, n))}
    b_groups = {t: i for i, t in enumerate(receivers(b_b, n))}
    rows = 1 + max(t[0] for t in c_tiles.values())
    cols = 1 + max(t[1] for t in c_tiles.values())
    for c, (m, k) in c_tiles.items():
        ax.add_patch(plt.Rectangle((k, m), 0.96, 0.96, fc=PALETTE[a_groups[tile_of(a_b, c)] % 8], ec="black", lw=0.5))
        ax.add_patch(plt.Rectangle((k + 0.55, m + 0.55), 0.38, 0.38, fc=PALETTE[8 + b_groups[tile_of(b_b, c)] % 8],
                                   ec="black", lw=0.5))
        ax.text(k + 0.3, m + 0.3, f"CTA {c}", fontsize=7, ha="center", va="center")
        ax.text(k + 0.3, m + 0.72, f"A{a_groups[tile_of(a_b, c)]}", fontsize=6, ha="center")
        ax.text(k + 0.74, m + 0.78, f"B{b_groups[tile_of(b_b, c)]}", fontsize=6, ha="center")
    ax.set_xlim(0, cols)
    ax.set_ylim(rows, 0)
    ax.set_aspect("equal")
    ax.set_xticks([i + 0.5 for i in range(cols)], [f"n{i}" for i in range(cols)], fontsize=7)
    ax.set_yticks([i + 0.5 for i in range(rows)], [f"m{i}" for i in range(rows)], fontsize=7)
    ax.set_title(f"C bases {[list(b) for b in acc_bases]}" + (" (2-CTA)" if two_ctas else ""), fontsize=8)
    return ax


def cta_pair(M: int = 256, N: int = 128, K: int = 64):
    """What each CTA of a pair holds for one M x N x K 2-CTA MMA: A and B from Triton's views of
    their shared layouts; the accumulator (tensor memory has no view) from the cga model."""
    import matplotlib.pyplot as plt
    import numpy as np
    from matplotlib.colors import ListedColormap
    from ..core.layouts import cta_owner, ownership
    from ..two_cta import tile_layouts
    lay = tile_layouts(M, N, K, True)
    a = ownership(lay["a"], [M, K]).cta
    b = ownership(lay["b"], [K, N]).cta
    c = np.log2(cta_owner([[1, 0]], [M, N], 2)).astype(int)
    cmap = ListedColormap(PALETTE[:2])
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.8), gridspec_kw={"width_ratios": [K, N, N]})
    for ax, data, title in ((axes[0], a, f"A [{M}, {K}] in shared memory"), (axes[1], b, f"B [{K}, {N}] in shared memory"),
                            (axes[2], c, f"C [{M}, {N}] in tensor memory")):
        ax.imshow(data, cmap=cmap, vmin=-0.5, vmax=1.5, aspect="auto", interpolation="nearest")
        ax.set_title(title, fontsize=9)
        for cta in (0, 1):
            r, k = np.argwhere(data == cta).mean(axis=0)
            ax.text(k, r, f"CTA {cta}", ha="center", va="center", fontsize=9, weight="bold")
    for ax, (ylab, xlab) in zip(axes, (("M", "K"), ("K", "N"), ("M", "N"))):
        ax.set_ylabel(ylab)
        ax.set_xlabel(xlab)
    fig.suptitle(f"one tcgen05.mma.cta_group::2, issued by CTA 0: C[{M}x{N}] = A[{M}x{K}] @ B[{K}x{N}]; "
                 "each CTA holds half of A (rows), half of B (columns), half of C (rows)", fontsize=9)
    fig.tight_layout()
    return fig



def tile_order(order, m_tiles: int, n_tiles: int, ax=None, first: int | None = None, title: str | None = None):
    """The tile grid, each tile labelled with the program id that computes it; the first
    ``first`` programs (those running together) highlighted."""
    validate.count(m_tiles, "m_tiles", high=1 << 12)
    validate.count(n_tiles, "n_tiles", high=1 << 12)
    import matplotlib.pyplot as plt
    import numpy as np
    ax = ax or plt.subplots(figsize=(0.45 * n_tiles + 1, 0.45 * m_tiles + 0.8))[1]
    grid = np.zeros((m_tiles, n_tiles))
    for pid, (m, n) in enumerate(order):
        grid[m, n] = pid
    ax.imshow(grid, cmap="cividis", aspect="equal")
    for pid, (m, n) in enumerate(order):
        hot = first is not None and pid < first
        ax.text(n, m, str(pid), ha="center", va="center", fontsize=7,
                color="black" if hot else "white", weight="bold" if hot else None,
                bbox=dict(boxstyle="square,pad=0.15", fc="#F0E442", ec="none") if hot else None)
    ax.set_xlabel("tile column n (of C)")
    ax.set_ylabel("tile row m (of C)")
    ax.set_xticks(range(n_tiles))
    ax.set_yticks(range(m_tiles))
    ax.set_title(title or "program id per tile", fontsize=9)
    return ax



# ------------------------------------------------------------------------------ reading it

_SCOPE_COLOURS = [PALETTE[i] for i in (4, 0, 2, 5, 6, 1, 3, 7)]   # Okabe-Ito: blue, orange, green, ...


def scope_colours(trace: Trace) -> dict:
    """scope name -> colour, in order of first appearance (the same kernel gets the same colours)."""
    names = [r["scope"] for r in sorted(trace.records(), key=lambda r: (r["start_ns"], r["kind"] != "scope"))]
    return {s: _SCOPE_COLOURS[i % len(_SCOPE_COLOURS)] for i, s in enumerate(dict.fromkeys(names))}


def _row_key(r: dict, by: str):
    if by == "warp":
        return r["cluster"], r["rank"], r["warp"]
    return r["cluster"], r["rank"], r["partition"]


def gantt(trace: Trace, ax=None, *, by: str = "warp", title: str | None = None, colours: dict | None = None):
    """A Gantt chart: a row per warp (``by="warp"``) or partition (``by="partition"``), the CTAs of
    a cluster stacked, one colour per scope, nested scopes thinner, time in ns. Same-warp events
    are hatched bars; events that cross warps are arrows from the warp that started them."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch
    if by not in ("warp", "partition"):
        raise ValueError(f"by must be 'warp' or 'partition', not {by!r}")
    recs = trace.records()
    if not recs:
        raise ValueError("the trace is empty: nothing to draw")
    colours = colours or scope_colours(trace)
    first_warp = {}
    for r in recs:
        k = _row_key(r, by)
        first_warp[k] = min(first_warp.get(k, r["warp"]), r["warp"])
    keys = sorted(first_warp, key=lambda k: (k[0], k[1], first_warp[k]))
    y = {k: i for i, k in enumerate(keys)}
    ax = ax or plt.subplots(figsize=(8, 1.2 + 0.22 * len(keys)))[1]

    crossing = [r for r in recs if r["kind"] == "event" and r["warp"] != r["end_warp"]]
    bars = [r for r in recs if not (r["kind"] == "event" and r["warp"] != r["end_warp"])]
    for (scope_name, kind) in dict.fromkeys((r["scope"], r["kind"]) for r in bars):
        mine = [r for r in bars if r["scope"] == scope_name and r["kind"] == kind]
        event = kind == "event"
        ax.barh([y[_row_key(r, by)] + (0.2 if event else 0) for r in mine],
                [max(r["end_ns"] - r["start_ns"], 0.5) for r in mine], left=[r["start_ns"] for r in mine],
                height=[0.35 if event else 0.8 * 0.6 ** r["line"] for r in mine],
                color=colours[scope_name], alpha=0.6 if event else 1.0, hatch="////" if event else None,
                edgecolor="white" if event else "none", linewidth=0)
    owner = {int(w): p for w, p in trace.meta.get("partitions", {}).items()}
    for r in crossing:
        end = dict(r, warp=r["end_warp"], partition=owner.get(r["end_warp"], r["partition"]))
        ax.annotate("", xy=(r["end_ns"], y[_row_key(end, by)]), xytext=(r["start_ns"], y[_row_key(r, by)]),
                    arrowprops=dict(arrowstyle="->", color=colours[r["scope"]], lw=0.8, alpha=0.8))

    for i in range(1, len(keys)):                     # lines between CTAs, heavier between clusters
        if keys[i][:2] != keys[i - 1][:2]:
            ax.axhline(i - 0.5, color="0.3" if keys[i][0] != keys[i - 1][0] else "0.75", lw=0.8)
    label = (lambda k: f"cluster {k[0]} CTA {k[1]} warp {k[2]}" + (
        f" ({owner[k[2]]})" if owner.get(k[2], "default") != "default" else "")) if by == "warp" else (
        lambda k: f"cluster {k[0]} CTA {k[1]} {k[2]}")
    if len(keys) > 24:                            # many warps: one label per CTA (its first row), the rest unlabelled
        firsts = [i for i, k in enumerate(keys) if i == 0 or keys[i - 1][:2] != k[:2]]
        ax.set_yticks(firsts, [f"cluster {keys[i][0]} CTA {keys[i][1]}" for i in firsts], fontsize=8)
        ax.set_yticks(range(len(keys)), minor=True)
        ax.set_ylabel(f"{by}s, grouped by CTA ({len(keys)} rows)", fontsize=9)
    else:
        ax.set_yticks(range(len(keys)), [label(k) for k in keys], fontsize=8)
    ax.set_ylim(len(keys) - 0.5, -0.5)
    ax.set_xlabel("time since the launch's first record (ns)" if trace.meta.get("clock_mhz") else
                  "time since the launch's first record (proton units: cycles, counted as ns)")
    ax.grid(axis="x", alpha=0.3)
    kinds = {(r["scope"], r["kind"]) for r in recs}
    handles = [Patch(facecolor=c, label=s) for s, c in colours.items() if (s, "scope") in kinds]
    handles += [Patch(facecolor=c, alpha=0.6, hatch="////", edgecolor="white", label=f"{s} (event)")
                for s, c in colours.items() if (s, "event") in kinds]
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), title="scope",
              title_fontsize=8)
    where = f" on {trace.meta['gpu']}, {trace.meta.get('date', '?')}" if "gpu" in trace.meta else ""
    ax.set_title(title or f"{trace.meta.get('kernel', 'kernel')}: measured{where}", fontsize=10)
    return ax


def cluster_hierarchy(ax=None):
    """What the book covers, in one picture: a GPU's GPCs, the SMs of one GPC, a cluster of four CTAs on four
    of them (each with its shared memory), distributed shared memory between the CTAs, and a TMA load from
    global memory multicast into every CTA of the cluster (the landing page's figure; drawn, not measured)."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch
    ax = ax or plt.subplots(figsize=(9, 5.2))[1]
    ax.set_xlim(0, 100)
    ax.set_ylim(0, 60)
    ax.axis("off")

    def box(x, y, w, h, text="", colour="white", edge="0.3", size=10, **kw):
        ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.3,rounding_size=1.2", fc=colour,
                                    ec=edge, lw=1.2, **kw))
        if text:
            ax.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=size)

    def arrow(a, b, colour, style="-|>", **kw):
        ax.add_patch(FancyArrowPatch(a, b, arrowstyle=style, mutation_scale=14, color=colour, lw=1.6, **kw))

    box(1, 1, 98, 58, colour="#f7f7f7")
    ax.text(3, 56, "GPU", fontsize=11, weight="bold", va="center")
    for i, x in enumerate((70, 84)):                                  # other GPCs
        box(x, 37, 12, 17, f"GPC {i + 1}\n(its own\nclusters)", colour="#ececec", size=9)
    box(4, 19, 62, 35, colour="#eef5fb", edge=PALETTE[4])
    ax.text(6, 51.5, "GPC 0: a cluster's CTAs are all resident at once, on SMs of one GPC", fontsize=9.5,
            va="center")
    ax.text(6, 48, "one cluster of 4 CTAs (num_ctas = 4, a cga_layout per tensor)", fontsize=9.5,
            va="center", color=PALETTE[4])
    xs = [7, 22, 37, 52]
    for i, x in enumerate(xs):
        box(x, 22, 12, 23, colour="white", edge=PALETTE[4])
        ax.text(x + 6, 43, f"SM {i}", ha="center", fontsize=9)
        box(x + 1, 35, 10, 5.5, f"CTA {i}", colour=PALETTE[i], size=9.5)
        box(x + 1, 23.5, 10, 6, "shared\nmemory", colour="#fff8e1", size=8.5)
    for a, b in zip(xs, xs[1:]):                                        # DSMEM between neighbours
        arrow((a + 11, 26.5), (b + 1, 26.5), PALETTE[5], style="<|-|>")
    ax.text(35.5, 32.3, "DSMEM: ld/st.shared::cluster, remote mbarrier arrives", ha="center", fontsize=8.5,
            color=PALETTE[5])
    box(4, 4, 40, 9, "global memory (HBM) and L2", colour="#ececec", size=10)
    box(50, 4, 14, 9, "TMA", colour="#e8f5e9", edge=PALETTE[2], size=10)
    arrow((44.2, 8.5), (49.6, 8.5), PALETTE[2])
    for x in xs:                                                         # one load, multicast to every CTA
        arrow((57, 13.4), (x + 6, 23.1), PALETTE[2])
    ax.text(67, 8.5, "one TMA load, multicast into\nevery CTA's shared memory", fontsize=9,
            color=PALETTE[2], va="center")
    box(70, 18, 26, 15, "Blackwell: two CTAs of a\ncluster issue one tcgen05\nMMA (2-CTA); cluster\n"
                        "launch control hands\nout the tiles", colour="#fdf0f6", edge=PALETTE[6], size=8.5)
    return ax


def measured_panel(softmax_result, matmul_result, axes=None):
    """What the book measures, in one picture (the landing page's): the multi-CTA softmax's bandwidth as a
    fraction of the copy ceiling against row length, and the Hopper cluster matmul against the better of
    cuBLAS and torch.matmul, both from recorded results (``results/``), the GPU and date in the titles."""
    import matplotlib.pyplot as plt
    from ..results import store
    if axes is None:
        fig, axes = plt.subplots(1, 2, figsize=(9, 3.6))
    ax, bx = axes
    ns = np.array(store.column(softmax_result, "N"), dtype=float)
    o = np.argsort(ns)
    for col, label, marker, ls, colour in (("gluon_gbps", "ours (picked cluster size)", "o", "-", PALETTE[4]),
                                           ("torch_gbps", "torch.softmax", "s", "--", PALETTE[7])):
        ys = np.array(store.column(softmax_result, col), dtype=float)
        ax.plot(ns[o], ys[o] / softmax_result["ceilings"]["copy_gbps"], marker=marker, ls=ls, color=colour,
                label=label)
    ax.set_xscale("log", base=2)
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("row length N (fp32)")
    ax.set_ylabel("fraction of copy bandwidth")
    ax.set_title(f"softmax, {softmax_result['gpu']} ({softmax_result['date']})", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    ks = np.array(store.column(matmul_result, "K"), dtype=float)
    best = np.array(store.column(matmul_result, "picked by K_tflops"), dtype=float)
    base = np.maximum(np.array(store.column(matmul_result, "cublas_tflops"), dtype=float),
                      np.array(store.column(matmul_result, "torch_tflops"), dtype=float))
    bx.plot(ks, best / base, marker="o", color=PALETTE[4], label="ours, picked by K")
    bx.axhline(1.0, color="0.3", ls="--", lw=1, label="better of cuBLAS and torch")
    bx.set_xscale("log", base=2)
    bx.set_xticks(ks, [str(int(k)) for k in ks])
    bx.set_ylim(0.7, 1.1)
    bx.set_xlabel("K (M = N = 8192, fp16)")
    bx.set_ylabel("ours / better baseline")
    bx.set_title(f"Hopper cluster matmul, {matmul_result['gpu']} ({matmul_result['date']})", fontsize=10)
    bx.grid(alpha=0.3)
    bx.legend(fontsize=8, loc="lower right")
    ax.figure.tight_layout()
    return axes
