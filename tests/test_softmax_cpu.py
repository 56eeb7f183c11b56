"""Softmax host side on the CPU: the picker, config limits and every validation message."""
import pytest
import torch

from multicta_kernels import softmax
from multicta_kernels.core import hardware
from multicta_kernels.core.hardware import UnsupportedHardwareError


@pytest.mark.parametrize("N", [1, 2, 3, 255, 256, 1000, 3000, 16385, 32768, 32769, 50000, 262144, 524288])
def test_picker_covers_every_width(N):
    cfg = softmax.pick_config(N)
    assert cfg.block_n >= N and cfg.block_n & (cfg.block_n - 1) == 0
    assert cfg.values_per_thread <= softmax.MAX_VALUES_PER_THREAD
    assert (cfg.num_ctas == 1) == (N <= softmax.ONE_CTA_MAX_N)
    assert cfg.reasons and str(cfg.num_ctas) in cfg.explain()


def test_picker_refuses_rows_beyond_a_cluster():
    with pytest.raises(ValueError, match="online_softmax"):
        softmax.pick_config(softmax.MAX_N + 1)


# The best configuration of the recorded sweeps (results/h200/softmax_sweep*.json, NVIDIA H200) for each width, read
# off the files: (CTAs, warps, rows per program), its exchange, its fraction of copy bandwidth as explain() prints it,
# how many configurations were measured and the day. Re-recording the sweeps means updating this table.
RECORDED_BEST = {   # (N, dtype): (CTAs, warps, rows), exchange, fraction of copy, configurations measured, the day
    (1024, "float32"): ((1, 2, 1), "one_round", "0.983", 14, "2026-11-30"),
    (4096, "float32"): ((1, 2, 1), "one_round", "0.980", 17, "2026-11-30"),
    (65536, "float32"): ((4, 4, 1), "one_round", "0.969", 34, "2026-12-02"),
    (131072, "float32"): ((16, 2, 1), "one_round", "0.943", 24, "2026-12-02"),
    (262144, "float32"): ((8, 8, 1), "staged", "0.935", 14, "2026-12-03"),
    (65536, "float16"): ((2, 16, 1), "staged", "0.939", 41, "2026-12-03"),
    (131072, "float16"): ((8, 4, 1), "pipelined", "0.927", 29, "2026-12-02"),
    (131072, "bfloat16"): ((8, 4, 1), "staged", "0.890", 29, "2026-12-03"),
    (524288, "float32"): ((16, 8, 1), "staged", "0.905", 7, "2026-12-04"),
    (1048576, "float32"): ((16, 16, 1), "halves", "0.796", 3, "2026-12-04"),
}
HOW = {"one_round": "", "pipelined": " with the pipelined exchange", "staged": " with the next row staged by TMA",
       "halves": " in halves (registers and shared memory)"}


@pytest.mark.parametrize("N, dtype", sorted(RECORDED_BEST))
def test_picker_takes_the_recorded_best_and_says_so(N, dtype):
    """For a width and dtype the recorded sweeps measured, the picker takes the best configuration and explain()
    names the measurement and its day."""
    (ctas, warps, rows), exchange, fraction, measured, day = RECORDED_BEST[(N, dtype)]
    cfg = softmax.pick_config(N, dtype)
    assert (cfg.num_ctas, cfg.num_warps, cfg.block_m, cfg.exchange) == (ctas, warps, rows, exchange)
    assert (f"measured on the NVIDIA H200 ({day}, results/h200/softmax_sweep*.json): {ctas} CTA(s) x {warps} "
            f"warp(s) x {rows} row(s){HOW[exchange]} moved {dtype} rows of {N} at {fraction} of the copy bandwidth, "
            f"the best of {measured} configurations tried") in cfg.explain()
    if exchange != "one_round":
        assert f"{exchange}: as many clusters as fit" in cfg.explain()


def test_picker_falls_back_to_the_fitted_rule_and_says_so():
    """No sweep measured rows as wide as 300000 (a 524288-wide tile): the fitted rule, and explain() says so."""
    cfg = softmax.pick_config(300000)
    assert softmax.recorded_best(300000) is None
    assert (cfg.num_ctas, cfg.num_warps, cfg.block_m) == (16, 8, 1)
    assert "no recorded sweep for this width" in cfg.explain()


@pytest.mark.parametrize("kwargs, msg", [
    (dict(N=4096, num_ctas=3), "num_ctas must be a power of two"),
    (dict(N=4096, num_ctas=32), "num_ctas must be a power of two"),
    (dict(N=4096, num_warps=0), "num_warps"),
    (dict(N=1 << 18, num_ctas=1, num_warps=4), "spill"),
    (dict(N=2, num_ctas=4), "cannot be split over 4 CTAs"),
    (dict(N=0), "positive integer"),
    (dict(N=64, dtype="float64"), "supports"),
])
def test_make_config_rejects(kwargs, msg):
    with pytest.raises((ValueError, TypeError), match=msg):
        softmax.make_config(**kwargs)


@pytest.mark.parametrize("x, exc, msg", [
    ([[1.0]], TypeError, "torch.Tensor"),
    (torch.randn(2, 3, 4), ValueError, "2-D"),
    (torch.randn(5), ValueError, "2-D"),
    (torch.randn(2, 3, dtype=torch.float64), TypeError, "float32, float16 and bfloat16"),
    (torch.randint(0, 4, (2, 3)), TypeError, "float32"),
])
def test_bad_inputs_name_the_fix(x, exc, msg):
    with pytest.raises(exc, match=msg):
        softmax.multicta_softmax(x)


@pytest.mark.skipif(hardware.has(hardware.CLUSTERS), reason="checks the refusal without clusters")
def test_refused_without_clusters_before_writing():
    """Valid arguments on a machine without clusters (a CPU; a pretended pre-Hopper GPU): the hardware
    is what refuses, and nothing is written."""
    x = torch.randn(4, 8)
    out = torch.full((4, 8), 7.0)
    for capability in (None, (8, 0)):
        import contextlib
        with hardware.pretend(capability) if capability else contextlib.nullcontext():
            with pytest.raises(UnsupportedHardwareError, match="sm_90 and newer"):
                softmax.multicta_softmax(x, out)
    assert (out == 7.0).all(), "nothing may be written on error"


def test_sizes_of_one_compile():
    """A launch turns M = 1 (and N / ALIGN = 1) into constants: both kernels still compile."""
    from multicta_kernels import catalog, lens
    for name in ("softmax", "softmax_two_pass"):
        spec = catalog.spec(name, num_ctas=4)
        for sizes in ({"M": 1}, {"n_div": 1}, {"x_stride_div": 1, "out_stride_div": 1}):
            assert ".reqnctapercluster 4" in lens.compile(lens.specialise(spec, **sizes), "sm_90a").ptx


def test_the_picker_takes_the_best_of_rows_of_the_very_width():
    """Rows of 3000 and of 4096 share a 4096-wide tile and the sweep measured both: each width takes its own best (the
    best on rows of 3000, 16 warps, ran 0.5 % behind 2 warps on rows of 4096:
    results/h200/softmax_one_cta_configs.json). A width the sweeps did not measure (4000) takes the tile's best,
    and explain() says it was measured on other rows."""
    assert softmax.recorded_best(4096)["rows_of"] == 4096
    assert softmax.recorded_best(3000)["rows_of"] == 3000
    rec = softmax.recorded_best(4000)
    assert rec["rows_of"] in (3000, 4096)
    assert f"rows of {rec['rows_of']} (the same 4096-wide tile)" in softmax.pick_config(4000).explain()
    assert "the same" not in softmax.pick_config(4096).explain().splitlines()[1]


def test_register_budget_keeps_the_tile_in_registers():
    """MAX_VALUES_PER_THREAD: at the limit the recorded wide-row configuration compiles without a spill
    (ptxas on this machine); at twice the limit the tile spills, which is why make_config refuses it."""
    from unittest import mock

    from multicta_kernels import catalog, lens, results
    widest = max(results.records(results.load("h200/softmax.json")), key=lambda r: r["N"])
    assert widest["values_per_thread"] == softmax.MAX_VALUES_PER_THREAD
    k = catalog.compile("softmax", "sm_90a", num_ctas=widest["num_ctas"], N=widest["N"],
                        num_warps=widest["num_warps"], block_m=widest["block_m"])
    fits = k.resources()
    assert fits["spill_stores"] == fits["spill_loads"] == fits["stack"] == 0 and fits["registers"] <= 255
    with mock.patch.object(softmax, "MAX_VALUES_PER_THREAD", 2 * softmax.MAX_VALUES_PER_THREAD):
        spec = softmax.softmax_spec(num_ctas=widest["num_ctas"] // 2, N=widest["N"],
                                    num_warps=widest["num_warps"], block_m=1)
    too_many = lens.compile(spec, "sm_90a").resources()
    assert too_many["spill_stores"] > 0
    with pytest.raises(ValueError, match="spill"):
        softmax.make_config(widest["N"], widest["num_ctas"] // 2, widest["num_warps"], 1)


def _masked_ctas(N):
    from multicta_kernels.softmax import pick_config
    cfg = pick_config(N)
    per_cta = cfg.block_n // cfg.num_ctas
    return sum(1 for c in range(cfg.num_ctas) if c * per_cta >= N)


def test_widths_leave_masked_slices():
    """The widths that tests/test_softmax_gpu.py shifts far below zero really leave CTAs of the picked
    cluster without a valid column (else those tests would prove nothing about the masked slices)."""
    assert [_masked_ctas(N) for N in (40000, 100000, 200000)] == [1, 3, 3]


def test_a_readers_kernel_runs_through_the_wrapper(monkeypatch):
    """kernel= with config_of(spec): chapter 1's "Change it and see" launches a reader's copy of the fused kernel
    (here with its own cga_layout) through multicta_softmax: the spec's layout, block and cluster, the wrapper's
    alignment and grid; the package's kernel is not run."""
    from dataclasses import replace as dc_replace

    from multicta_kernels import catalog, lens
    from triton.experimental.gluon import language as gl
    package = catalog.spec("softmax", num_ctas=4)
    L = package.constexprs["layout"]
    mine_fn = lens.variant(softmax.softmax_kernel, {"rows = rows.to(gl.int64)": "rows = rows.to(gl.int64)  # mine"},
                           name="mine_softmax")
    mine = lens.with_kernel(package, mine_fn, layout=gl.BlockedLayout(L.size_per_thread, L.threads_per_warp,
                                                                      L.warps_per_cta, L.order,
                                                                      cga_layout=[[0, 1, 0], [0, 0, 1]]))
    cfg = softmax.config_of(mine)
    assert (cfg.block_n, cfg.block_m, cfg.num_ctas, cfg.num_warps) == (mine.constexprs["BLOCK_N"],
                                                                      mine.constexprs["BLOCK_M"], 4, 4)
    assert cfg.layout is mine.constexprs["layout"] and dc_replace(cfg, layout=L) == softmax.config_of(package)
    calls, theirs = [], []
    monkeypatch.setattr(mine_fn, "run", lambda *a, **kw: calls.append((a, kw)))
    monkeypatch.setattr(softmax.softmax_kernel, "run", lambda *a, **kw: theirs.append(a))
    x = torch.randn(3, cfg.block_n - 37)
    with hardware.pretend((9, 0), "NVIDIA H200"):
        softmax.multicta_softmax(x, config=cfg, kernel=mine_fn)
    assert theirs == [] and len(calls) == 1
    assert calls[0][1]["layout"] is mine.constexprs["layout"] and calls[0][1]["num_ctas"] == 4


@pytest.mark.parametrize("kwargs, exc, msg", [
    (dict(kernel=lambda *a: None), TypeError, "@gluon.jit"),
    (dict(kernel=softmax.online_softmax_kernel), ValueError, "softmax_kernel's parameters"),
    (dict(kernel=softmax.softmax_kernel, two_pass=True), ValueError, "replaces the fused softmax_kernel"),
])
def test_a_bad_kernel_is_refused_before_the_hardware(kwargs, exc, msg):
    with pytest.raises(exc, match=msg):
        softmax.multicta_softmax(torch.randn(4, 100), **kwargs)
