"""What Part 0 and chapter 1 teach, checked against the functions and compiled code they teach it from.

The notebooks assert their claims when they run; these tests pin the claims that live in prose (or in
the package, outside the notebook) so that a change to a kernel or a helper that makes the text wrong
fails here, on a CPU, with a message saying which sentence to fix.
"""
import ast
import json
import math
import re
import struct
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
PART0 = ROOT / "notebooks" / "00-triton-foundations.ipynb"
CH1 = ROOT / "notebooks" / "01-cga-layouts.ipynb"


def cells(path):
    return json.loads(path.read_text())["cells"]


def source(cell):
    return "".join(cell["source"])


def markdown(path):
    return "\n".join(source(c) for c in cells(path) if c["cell_type"] == "markdown")


def own_cells(path):
    """The cells this test file speaks for: chapter 1 without its benchmark section (from "## How fast,
    measured" up to "## Pitfalls"), which is rebuilt from recorded results elsewhere."""
    out, skipping = [], False
    for c in cells(path):
        text = source(c)
        if c["cell_type"] == "markdown" and text.startswith("## How fast"):
            skipping = True
        elif c["cell_type"] == "markdown" and text.startswith("## Pitfalls"):
            skipping = False
        if not skipping:
            out.append(c)
    return out


# ------------------------------------------------------------------ chapter 1: the layout explorer

def test_the_explorer_draws_what_chapter_1_says_about_its_example():
    import matplotlib.pyplot as plt

    from multicta_kernels import widgets
    calls = [c for c in cells(CH1) if c["cell_type"] == "code" and "widgets.ownership_explorer(" in source(c)]
    assert len(calls) == 1
    assert 'widgets.ownership_explorer("BlockedLayout", [[0, 1], [1, 0]], [16, 32])' in source(calls[0])
    claims = re.findall(r"CTA (\d) (top|bottom) (left|right)", markdown(CH1))
    assert sorted(claims) == [("0", "top", "left"), ("1", "top", "right"), ("2", "bottom", "left"),
                              ("3", "bottom", "right")]
    assert "`[8, 16]`\nquarter" in markdown(CH1) or "`[8, 16]` quarter" in markdown(CH1)
    fig = widgets.ownership_figure("BlockedLayout", [[0, 1], [1, 0]], [16, 32])
    drawn = np.asarray(fig.axes[0].images[0].get_array()).astype(int)
    plt.close(fig)
    for cta, vertical, horizontal in claims:
        rows = slice(0, 8) if vertical == "top" else slice(8, 16)
        cols = slice(0, 16) if horizontal == "left" else slice(16, 32)
        assert (drawn[rows, cols] == int(cta)).all(), f"CTA {cta} does not own the {vertical} {horizontal} quarter"


# ------------------------------------------------------------------ where a cluster's CTAs run

@pytest.mark.parametrize("path", [ROOT / "book" / "intro.md", CH1, PART0])
def test_no_page_says_a_clusters_ctas_are_on_different_sms(path):
    text = path.read_text() if path.suffix == ".md" else markdown(path)
    text = " ".join(text.split())
    for wrong in ("are on *different SMs*", "are on different SMs", "on neighbouring SMs", "on C different SMs"):
        assert wrong not in text, f"{path.name}: {wrong!r}: CUDA guarantees co-scheduling within one GPC, not one SM each"


def test_chapter_1_says_what_is_guaranteed():
    text = " ".join(markdown(CH1).split())
    assert "co-scheduling" in text and "one GPC" in text and "may share an SM" in text


# ------------------------------------------------------------------ Part 0: the map

def test_part_0_map_links_every_section_and_only_sections():
    text = markdown(PART0)
    targets = re.findall(r"^\((p0-[a-z0-9-]+)\)=$", text, flags=re.M)
    links = re.findall(r"\]\(#(p0-[a-z0-9-]+)\)", text)
    assert len(targets) == len(set(targets)), "a target is defined twice"
    assert links == targets, "the map's rows and the sections' targets differ (or are not in the same order)"


# ------------------------------------------------------------------ Part 0: the persistent matmul

def test_the_previous_tiles_store_comes_after_this_tiles_k_loop():
    """Part 0 says the store of tile i-1 overlaps none of tile i's loads and math: in the PTX it
    comes after tile i's last MMA and the wait for all of them. If foundations.py moves the store,
    rewrite the "Persistent kernels" section."""
    from multicta_kernels import catalog
    lines = catalog.compile("tl_persistent_matmul", "sm_90a").ptx.splitlines()
    at = lambda pattern: [i for i, line in enumerate(lines) if pattern in line]      # noqa: E731
    last_mma, drained, first_store = at("wgmma.mma_async")[-1], at("wgmma.wait_group.sync.aligned 0")[0], at("st.global")[0]
    assert last_mma < drained < first_store


# ------------------------------------------------------------------ Part 0: libdevice asin

def _asin_ptx():
    from multicta_kernels import catalog
    return catalog.compile("tl_asin", "sm_90a")


def test_asin_is_inlined_arithmetic():
    k = _asin_ptx()
    ops = k.census()
    assert not any(op.startswith("call") for op in ops)
    assert "__nv_asinf" in k.ptx                        # the inlined function's block label
    per_thread = k.spec.constexprs["BLOCK"] // (32 * k.spec.options["num_warps"])
    assert ops["rsqrt.approx.ftz.f32"] == per_thread   # one square root per element


def test_asin_polynomial_starts_like_the_taylor_series():
    from multicta_kernels import lens
    f32 = lambda token: struct.unpack(">f", bytes.fromhex(token[2:]))[0]            # noqa: E731
    const, fmas, cuts = {}, [], set()
    for _, op, line in lens.instructions(_asin_ptx().ptx):
        if " " not in line.strip():
            continue
        dst, *args = [t.strip(" ;") for t in line.split(None, 1)[1].split(",")]
        if op == "mov.b32" and args and args[0].startswith("0f"):
            const[dst] = f32(args[0])
        elif op.startswith("fma"):
            fmas.append((dst, args))
        elif op == "setp.gt.f32" and args[-1].startswith("0f"):
            cuts.add(round(f32(args[-1]), 6))
    chains = []
    for i, (dst, args) in enumerate(fmas):
        if args[0] in const and args[2] in const:
            chain = [(dst, args)]
            for d2, a2 in fmas[i + 1:]:
                if a2[0] == chain[-1][0] and a2[2] in const:
                    chain.append((d2, a2))
            chains.append(chain)
    chain = max(chains, key=len)
    assert len(chain) == 4                               # a degree-4 polynomial in x^2, by Horner's rule
    constant_term = const[chain[-1][1][2]]
    assert abs(constant_term - 1 / 6) < 1e-4            # asin x = x + x^3/6 + ...
    assert cuts == {0.56}
    products = [const[a[0]] * const[a[1]] for _, a in fmas if a[0] in const and a[1] in const and a[0] != a[1]]
    assert any(abs(p - math.pi / 2) < 1e-6 for p in products)


# ------------------------------------------------------------------ Part 0: tl.range vs num_stages

def test_tl_range_pipelines_a_loop_the_launch_option_leaves_alone():
    """Part 0: the launch option num_stages pipelines loads that feed tl.dot; tl.range(num_stages=)
    pipelines the loop it is on. A loop without tl.dot, compiled both ways."""
    import dataclasses

    import triton.language as tl

    from multicta_kernels import foundations, lens

    @foundations.kernel
    def fold(x_ptr, out_ptr, M, K, BLOCK_M: tl.constexpr, BK: tl.constexpr, STAGES: tl.constexpr):
        rows = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None]
        j = tl.arange(0, BK)[None, :]
        acc = tl.full((BLOCK_M, BK), 0.0, tl.float32)
        for k in tl.range(0, K, BK, num_stages=STAGES):
            acc += tl.load(x_ptr + rows * K + k + j, mask=(rows < M) & (k + j < K), other=0.0)
        tl.store(out_ptr + rows * BK + j, acc, mask=rows < M)

    spec = lens.KernelSpec(name="fold", fn=fold, language="triton",
                           signature={"x_ptr": "*fp32", "out_ptr": "*fp32", "M": "i32", "K": "i32",
                                      "BLOCK_M": "constexpr", "BK": "constexpr", "STAGES": "constexpr"},
                           constexprs={"BLOCK_M": 64, "BK": 64, "STAGES": None},
                           options={"num_warps": 4, "num_stages": 3}, divisible=("x_ptr", "out_ptr", "K"))
    plain = lens.compile(spec, "sm_90a")
    piped = lens.compile(dataclasses.replace(spec, constexprs={**spec.constexprs, "STAGES": 3}), "sm_90a")
    assert plain.census(["cp.async"])["cp.async"] == 0
    assert piped.census(["cp.async.cg"])["cp.async.cg"] > 0 and piped.shared_bytes > plain.shared_bytes


# ------------------------------------------------------------------ reading: hidden plot code, no stray glue

@pytest.mark.parametrize("path", [PART0, CH1])
def test_figure_cells_hide_their_input(path):
    for c in own_cells(path):
        if c["cell_type"] == "code" and "plt.subplots(" in source(c):
            assert "hide-input" in c["metadata"].get("tags", []), f"{path.name} cell {c['id']} draws a figure: tag it hide-input"


@pytest.mark.parametrize("path", [PART0, CH1])
def test_no_cell_ends_with_a_glue_call(path):
    """A cell whose last statement is ``notebook.glue(...)`` prints the glued value under the cell."""
    for c in own_cells(path):
        if c["cell_type"] != "code":
            continue
        body = ast.parse(source(c)).body
        last = body[-1] if body else None
        assert not (isinstance(last, ast.Expr) and isinstance(last.value, ast.Call)
                    and getattr(last.value.func, "attr", None) == "glue"), f"{path.name} cell {c['id']} ends with glue"


def test_part_0_does_not_call_the_source_a_seed():
    assert "seed" not in markdown(PART0).lower()
