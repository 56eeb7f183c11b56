"""What Part 0 (and its Appendix A) and chapter 1 teach, checked against the functions and compiled
code they teach it from.

The notebooks assert their claims when they run; these tests pin the claims that live in prose (or in
the package, outside the notebook) so that a change to a kernel or a helper that makes the text wrong
fails here, on a CPU, with a message saying which sentence to fix.
"""
import ast
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
PART0 = ROOT / "notebooks" / "00-triton-foundations.ipynb"
APPENDIX = ROOT / "notebooks" / "A1-triton-extras.ipynb"     # the sections Part 0 no longer carries
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

    from multicta_kernels.show import widgets
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
    """Co-scheduling within a GPC is what CUDA promises; whether two CTAs of one cluster share an SM is not shown
    (Triton's launcher asks for the SPREAD policy), so the chapter must not claim it."""
    text = " ".join(markdown(CH1).split())
    assert "co-scheduling" in text and "one GPC" in text and "CU_CLUSTER_SCHEDULING_POLICY_SPREAD" in text
    assert "may share an SM" not in text and "on the same SM or not" not in text


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


# --------------------------------------------------------- Appendix A (from Part 0): libdevice asin

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
    """Appendix A decodes the Horner chain of asin's PTX with foundations.asin_polynomial and says:
    a degree-4 polynomial in t = x^2, the first coefficients close to the Taylor series, the cut at
    0.56, pi/2 as the product of two constants, a square root through rsqrt."""
    from multicta_kernels import foundations
    poly = foundations.asin_polynomial(_asin_ptx().ptx)
    assert poly["steps"] == 4 and len(poly["coeffs"]) == 5   # a degree-4 polynomial in x^2, by Horner's rule
    assert abs(poly["coeffs"][0] - 1 / 6) < 1e-4             # asin x = x + x^3/6 + ...
    assert abs(poly["coeffs"][1] - 3 / 40) < 2e-3            # ... + 3 x^5/40 + ...
    assert poly["taylor"][:2] == [1 / 6, 3 / 40]
    assert [round(c, 6) for c in poly["cuts"]] == [0.56]
    assert any(abs(p - math.pi / 2) < 1e-6 for p in poly["constant_products"])
    assert poly["rsqrt"] and poly["excerpt"].count("fma") == 4


def test_asin_polynomial_refuses_ptx_without_a_chain():
    from multicta_kernels import catalog, foundations
    with pytest.raises(ValueError, match="no fma chain"):
        foundations.asin_polynomial(catalog.compile("tl_scale", "sm_90a").ptx)


# ------------------------------------------------------------------ Part 0: tl.range vs num_stages

def test_tl_range_pipelines_a_loop_the_launch_option_leaves_alone():
    """Part 0: the launch option num_stages pipelines loads that feed tl.dot; tl.range(num_stages=)
    pipelines the loop it is on. A loop without tl.dot (foundations.fold_kernel), compiled both ways
    with the launch option num_stages=3."""
    from multicta_kernels import catalog
    plain = catalog.compile("tl_fold", "sm_90a", stages=None)
    assert plain.spec.options["num_stages"] == 3
    piped = {s: catalog.compile("tl_fold", "sm_90a", stages=s) for s in (2, 3, 4)}
    assert plain.census(["cp.async"])["cp.async"] == 0 and plain.census(["ld.global"])["ld.global"] > 0
    for k in piped.values():
        assert k.census(["cp.async.cg"])["cp.async.cg"] > 0 and k.census(["ld.global"])["ld.global"] == 0
    assert plain.shared_bytes < piped[2].shared_bytes < piped[3].shared_bytes < piped[4].shared_bytes


def test_fold_adds_each_rows_chunks():
    """foundations.fold, run (under the interpreter on a CPU): the partial sums add up to each row's sum,
    with and without the tl.range hint, for a width that is not a multiple of the chunk."""
    import torch

    from multicta_kernels import foundations
    x = torch.randn(50, 300, device=foundations.torch_device())
    for stages in (None, 3):
        folded = foundations.fold(x, stages=stages)
        assert folded.shape == (50, 64)
        torch.testing.assert_close(folded.sum(1), x.sum(1), atol=1e-4, rtol=1e-4)
    with pytest.raises(TypeError, match="float32"):
        foundations.fold(x.double())


# ------------------------------------------------------------------ reading: hidden plot code, no stray glue

@pytest.mark.parametrize("path", [PART0, APPENDIX, CH1])
def test_figure_cells_hide_their_input(path):
    for c in own_cells(path):
        if c["cell_type"] == "code" and "plt.subplots(" in source(c):
            assert "hide-input" in c["metadata"].get("tags", []), f"{path.name} cell {c['id']} draws a figure: tag it hide-input"


@pytest.mark.parametrize("path", [PART0, APPENDIX, CH1])
def test_no_cell_ends_with_a_glue_call(path):
    """A cell whose last statement is ``notebook.glue(...)`` prints the glued value under the cell."""
    for c in own_cells(path):
        if c["cell_type"] != "code":
            continue
        body = ast.parse(source(c)).body
        last = body[-1] if body else None
        assert not (isinstance(last, ast.Expr) and isinstance(last.value, ast.Call)
                    and getattr(last.value.func, "attr", None) == "glue"), f"{path.name} cell {c['id']} ends with glue"


@pytest.mark.parametrize("path", [PART0, APPENDIX])
def test_part_0_does_not_call_the_source_a_seed(path):
    assert "seed" not in markdown(path).lower()


def test_what_part_0_moved_is_in_the_appendix_whole():
    """The sections Part 0 gave to Appendix A (an LRU model of tile order, hints, libdevice,
    atomics, launch metadata, autograd) are there and nowhere else; what the multi-CTA chapters use
    stays in Part 0."""
    moved = ["lru_dram_loads", "tl_hinted_copy", "asin_polynomial", "locked_sum", "_launch_metadata",
             "autograd_example"]
    code = {p: "\n".join(source(c) for c in cells(p) if c["cell_type"] == "code")
            for p in (PART0, APPENDIX)}
    assert all(m in code[APPENDIX] and m not in code[PART0] for m in moved), moved
    kept = ["blocks_loaded", "persistent_matmul", "split_epilogue", "Cublas", "tma_double",
            "programs_demo"]
    assert all(k in code[PART0] for k in kept), kept
    ids = [c["id"] for p in (PART0, APPENDIX) for c in cells(p)]
    assert len(ids) == len(set(ids)), "a cell id in both notebooks"
