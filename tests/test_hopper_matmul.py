"""Chapter 6: the Hopper cluster matmul. CPU: every configuration compiles for sm_90a with wgmma,
multicast TMA and a cluster launch; the plan's and the wrapper's messages. Hopper-marked: correctness
against torch.matmul for every configuration the chapter measures, with edge tiles in M, N and K,
output poisoned with NaN first."""
import re

import pytest
import torch

from calls import assert_refused_before_hardware
from multicta_kernels.core import hardware
from multicta_kernels import hopper_matmul as hm
from multicta_kernels.benchmarks import hopper_matmul as hm_bench
from multicta_kernels import lens
from multicta_kernels.core import dtypes
from multicta_kernels.core.accuracy import assert_matmul_close, poisoned
from triton.experimental.gluon import language as gl

CONFIGS = {**hm.VARIANTS, **hm.ABLATION, "sub-tiled epilogue": dict(epilogue_n=64, stages=4),
           "bm64 bn128": dict(block_m=64, block_n=128, stages=4)}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_compiles_with_wgmma_and_multicast(name):
    cfg = CONFIGS[name]
    k = lens.compile(hm.hopper_matmul_spec(**cfg), "sm_90a")
    assert all(k.census(k.spec.expect).values()), k.census(k.spec.expect)
    assert k.census(["ld.local"])["ld.local"] == 0                   # no register spills
    assert k.shared_bytes <= hardware.SMEM_PER_CTA
    if cfg.get("num_ctas", hm.CONFIG["num_ctas"]) > 1:
        assert ".reqnctapercluster" in k.ptx and ".multicast::cluster" in k.ptx


def test_ping_pong_gives_each_consumer_a_warpgroup_and_registers():
    """wgmma runs on whole warpgroups: each consumer must own 4 aligned warps, with the registers."""
    k = lens.compile(hm.hopper_matmul_spec(**hm.VARIANTS["ping-pong"]), "sm_90a")
    assert re.search(r"setmaxnreg\.inc\.sync\.aligned\.u32\s+232;", k.ptx)   # both consumers get 232 registers
    wgmma = [ln for ln in k.ptx.splitlines() if "wgmma.mma_async" in ln]
    assert wgmma and len(wgmma) % 2 == 0                                  # one loop per consumer: the same code twice


@pytest.mark.parametrize("cfg, msg", [({"num_ctas": 8}, "1, 2 or 4"), ({"block_m": 256}, "64 or 128"),
                                      ({"block_n": 512}, "power of two from 8 to 256"), ({"stages": 5}, "shared memory"),
                                      ({"block_k": 128}, "32 or 64"), ({"consumers": 2}, "ping-pong"),
                                      ({"epilogue_n": 48}, "epilogue_n"),
                                      ({"consumers": 2, "block_m": 64, "warp_specialize": False}, "ping-pong"),
                                      ({"split_k": 3}, r"split_k = 3 must divide a tile's K steps \(ceil\(K / block_k\) "
                                                       r"= 64\): one of \[1, 2, 4, 8, 16\]"),
                                      ({"split_k": 2, "warp_specialize": False}, "warp_specialize=True"),
                                      ({"split_k": 0}, "split_k"), ({"split_k": 2}, "shared memory")])
def test_plan_messages(cfg, msg):
    with pytest.raises(ValueError, match=msg):
        hm.hopper_matmul_spec(**cfg)


SPLIT_K = {f"split-K {s}": dict(hm.SPLIT_K_CONFIG, split_k=s) for s in (2, 4, 8)} | {
    "split-K 2, 128 x 256": dict(split_k=2, epilogue_n=64), "split-K 2, 2-CTA": dict(split_k=2, num_ctas=2, epilogue_n=64)}


@pytest.mark.parametrize("name", sorted(SPLIT_K))
def test_split_k_compiles_with_fp32_staging(name):
    """Split-K's epilogue stages fp32 partials (twice the bytes of fp16), within a CTA's shared memory, no spills."""
    p = hm.plan(8192, 8192, 4096, dtypes.DTYPES["float16"].gl, **SPLIT_K[name])
    assert p.out_dtype == gl.float32 and p.c.element_bitwidth == 32
    k = lens.compile(hm.hopper_matmul_spec(**SPLIT_K[name]), "sm_90a")
    assert all(k.census(k.spec.expect).values()) and k.census(["ld.local"])["ld.local"] == 0
    assert k.shared_bytes <= p.smem_bytes < k.shared_bytes + 1024 <= hardware.SMEM_PER_CTA + 1024   # the plan's count


@pytest.mark.parametrize("name", ["split-K 4", "split-K 8", "split-K 2, 128 x 256", "split-K 2, 2-CTA", "no split"])
def test_split_k_units_cover_every_tile_and_k_step_once(name):
    """The kernel's own program, run on the CPU for every program of a 5-program grid (``program.tma_coordinates``):
    the producer loads each (tile, K step) exactly once; each unit's partial is stored at the rows of the K slice
    it loaded, in the tile it loaded, by the consumer whose turn it is; every slice of every tile is stored once."""
    from collections import Counter

    from multicta_kernels.protocols import program
    cfg = SPLIT_K.get(name, hm.SHORT_K_CONFIG)
    M, N, K, grid = 300, 520, 1000, 5                      # edge tiles in M and N; K ends inside its last block
    p = hm.plan(M, N, K, gl.float16, **cfg)
    TM, TN, BK, S = p.tile_m, p.block_n, p.block_k, p.split_k
    steps = -(-K // BK) // S
    loads, stores = Counter(), Counter()
    for prog, units in enumerate(program.hopper_matmul_walk(cfg, M, N, K, grid)):
        for j, u in enumerate(units):
            assert u["a"], f"program {prog} stored {u['stores']} for no unit it loaded"
            assert [ak for _, ak in u["a"]] == [bk for bk, _ in u["b"]], "A and B of one stage at the same K"
            unit = [(am, bn, ak // BK) for (am, ak), (_, bn) in zip(u["a"], u["b"])]
            (m0, n0, k0), ks = unit[0], unit[0][2] // steps
            assert [k for _, _, k in unit] == list(range(k0, k0 + steps)) and k0 % steps == 0
            assert {(m, n) for m, n, _ in unit} == {(m0, n0)}, "one tile a unit"
            assert u["stores"] == [(ks * p.slice_rows(M) + m0 if S > 1 else m0, n0 + i * p.epilogue_n)
                                   for i in range(p.split)], f"unit {j} of program {prog}: stored {u['stores']}"
            loads.update(unit)
            stores.update(u["stores"])
    m_tiles, n_tiles = -(-M // TM), -(-N // TN)
    assert loads == Counter((tm * TM, tn * TN, k) for tm in range(m_tiles) for tn in range(n_tiles)
                            for k in range(steps * S))
    assert stores == Counter((s * p.slice_rows(M) + tm * TM, tn * TN + i * p.epilogue_n) for s in range(S)
                             for tm in range(m_tiles) for tn in range(n_tiles) for i in range(p.split))


@pytest.mark.parametrize("name", ["split-K 4", "split-K 2, 2-CTA"])
def test_a_split_runs_the_synchronisation_of_the_same_kernel_unsplit(name):
    """Per loop of the PTX, the split kernel executes the same barrier waits and arrives, fences, CTA barriers and
    cluster barriers as the kernel with the same stages and store slices and no split (``lens.schedule``): a unit is
    a shorter tile, and no init fence or cluster barrier enters a loop."""
    from collections import Counter

    def sync(cfg):
        k = lens.compile(hm.hopper_matmul_spec(**cfg), "sm_90a")
        return Counter((r["loop"].source if r["loop"] else "once", r["op"]) for r in lens.schedule(k.ptx))
    split = sync(SPLIT_K[name])
    assert split == sync({**SPLIT_K[name], "split_k": 1})
    assert not [key for key in split if key[0] != "once" and key[1] in ("fence.mbarrier_init", "barrier.cluster.arrive",
                                                                        "barrier.cluster.wait")]


@pytest.mark.parametrize("name", ["split-K 4", "split-K 2, 2-CTA"])
def test_the_sum_reads_the_bands_the_matmul_writes(name, monkeypatch):
    """``prepare`` on a CPU with an H200 pretended (``dryrun``: compiled for sm_90a, launches stopped): the matmul's
    output descriptor is over the fp32 workspace the sum reads, split_k bands of M padded to whole tiles (the rows
    ``Ring.unit`` stores to, tested above), and the sum is told that band height and covers M x N. M = 300 is not a
    whole number of tiles, so a band height of M reads the wrong rows."""
    from multicta_kernels.core import dryrun
    seen = {}

    class Spy:                               # the two launches' arguments, as prepare hands them over
        def __init__(self, real, key):
            self.real, self.key = real, key

        def __getattr__(self, attr):
            return getattr(self.real, attr)

        def warmup(self, *args, **kwargs):
            seen[self.key] = args
            return self.real.warmup(*args, **kwargs)
    monkeypatch.setattr(hm, "hopper_matmul_kernel", Spy(hm.hopper_matmul_kernel, "matmul"))
    monkeypatch.setattr(hm, "split_k_sum_kernel", Spy(hm.split_k_sum_kernel, "sum"))
    M, N, K, cfg = 300, 520, 1024, SPLIT_K[name]
    with dryrun.dry_run((9, 0), "NVIDIA H200", 132) as session:
        hm.prepare(torch.randn(M, K).half(), torch.randn(K, N).half(), **cfg)()
    p = hm.plan(M, N, K, gl.float16, **cfg)
    rows = -(-M // p.tile_m) * p.tile_m
    ws, out, m, n, band, _, split = seen["sum"][:7]
    c_desc = seen["matmul"][hm.hopper_matmul_kernel.arg_names.index("c_desc")]
    assert c_desc.base is ws and ws.dtype == torch.float32 and list(c_desc.shape) == [p.split_k * rows, N]
    assert (m, n, band, split) == (M, N, rows, p.split_k) and tuple(out.shape) == (M, N)
    (grid,) = [launch.grid for launch in session.launches if launch.kernel == "split_k_sum_kernel" and launch.launched]
    assert grid[0] * hm.SUM_BLOCK[0] >= M and grid[1] * hm.SUM_BLOCK[1] >= N


def test_the_split_k_sum_reads_16_bytes_a_load_and_adds_in_k_order():
    """The second kernel, as launched at 128 x 4096 (N a multiple of 16, so Triton's launch marks it divisible: at
    other N the loads stay scalar): each thread loads 4 consecutive fp32 (ld.global.v4) of every slice and adds
    them in slice order, one rounding to the output type at the end."""
    BM, BN = hm.SUM_BLOCK
    sig = {"ws_ptr": "*fp32", "out_ptr": "*fp16", "M": "i32", "N": "i32", "slice_rows": "i32", "out_stride": "i32",
           "SPLIT_K": "constexpr", "BM": "constexpr", "BN": "constexpr", "layout": "constexpr"}
    spec = lens.KernelSpec("split_k_sum", hm.split_k_sum_kernel, sig,
                           {"SPLIT_K": 4, "BM": BM, "BN": BN, "layout": hm.SUM_LAYOUT}, {"num_warps": 4},
                           targets=("sm_90a",), expect=(), divisible=("ws_ptr", "out_ptr"))
    ptx = lens.compile(lens.specialise(spec, M=128, N=4096, slice_rows=128, out_stride=4096), "sm_90a").ptx
    loads = re.findall(r"ld\.global[.\w]*\.v4\.b32", ptx)
    assert len(loads) == 4 * BM * BN // (4 * 128)         # 4 slices x the thread's 8 vectors
    assert len(re.findall(r"\badd\.f32", ptx)) == 3 * BM * BN // 128 and re.search(r"cvt\.rn\.f16(x2)?\.f32", ptx)


def test_against_baseline_picks_the_best_variant_and_the_better_baseline():
    table = {"columns": ["M", "N", "K", "a_tflops", "a_rel_err", "b_tflops", "b_rel_err", "cublas_tflops",
                         "torch_tflops"],
             "rows": [[8, 8, 8, 500.0, 0.0, 600.0, 0.0, 580.0, 620.0], [8, 8, 16, 700.0, 0.0, 650.0, 0.0, 690.0, 640.0]]}
    got = hm.against_baseline(table)
    assert [(g["best"], g["baseline"]) for g in got] == [("b", 620.0), ("a", 690.0)]
    assert got[0]["ratio"] == pytest.approx(600 / 620) and got[1]["ratio"] == pytest.approx(700 / 690)


def test_wrapper_messages():
    a = torch.randn(64, 64, dtype=torch.float16)
    with pytest.raises(TypeError, match="unknown options"):
        hm.hopper_matmul(a, a, tiles=2)
    with pytest.raises(ValueError, match="multiples of 8"):
        hm.hopper_matmul(torch.randn(64, 60, dtype=torch.float16), torch.randn(60, 64, dtype=torch.float16))
    with pytest.raises(ValueError, match=r"need \(M, K\) @ \(K, N\)"):
        hm.hopper_matmul(torch.randn(64, 64, dtype=torch.float16), torch.randn(32, 64, dtype=torch.float16))


@pytest.mark.wgmma
@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.parametrize("M, N, K, dtype", [(1000, 776, 328, torch.float16), (3000, 2056, 1000, torch.bfloat16),
                                            (128, 256, 64, torch.float16), (2048, 2048, 4096, torch.float16),
                                            (1, 256, 512, torch.float16), (17, 8, 64, torch.bfloat16)])
def test_matches_torch(name, M, N, K, dtype):
    """Element by element, NaN-poisoned output; edge tiles, K of one block, M = 1 (a decode GEMM)."""
    a = torch.randn(M, K, device="cuda").to(dtype)
    b = torch.randn(K, N, device="cuda").to(dtype)
    c = poisoned((M, N), dtype)
    hm.hopper_matmul(a, b, out=c, **CONFIGS[name])
    assert_matmul_close(c, a, b, name)


@pytest.mark.wgmma
@pytest.mark.parametrize("name", sorted(SPLIT_K))
@pytest.mark.parametrize("M, N, K, dtype, programs", [(1000, 776, 1024, torch.float16, None),
                                                      (3000, 2056, 1000, torch.bfloat16, None),
                                                      (1, 256, 512, torch.float16, None),
                                                      (17, 8, 1024, torch.bfloat16, None),
                                                      (128, 4096, 14336, torch.float16, None),
                                                      (1000, 776, 1024, torch.float16, 3)])
def test_split_k_matches_torch(name, M, N, K, dtype, programs):
    """Every K slice lands in its own partial and every partial in the sum: element by element against torch, with
    edge tiles in M and N, a K (1000) whose last slice ends inside a block, and 3 programs walking many units."""
    a = torch.randn(M, K, device="cuda").to(dtype)
    b = torch.randn(K, N, device="cuda").to(dtype)
    c = poisoned((M, N), dtype)
    hm.hopper_matmul(a, b, out=c, programs=programs, **SPLIT_K[name])
    assert_matmul_close(c, a, b, name)


@pytest.mark.wgmma
@pytest.mark.parametrize("name", ["1-CTA", "2-CTA", "ping-pong"])
def test_persistence_with_few_programs(name):
    a = torch.randn(1024, 512, device="cuda", dtype=torch.float16)
    b = torch.randn(512, 1024, device="cuda", dtype=torch.float16)
    c = poisoned((1024, 1024), torch.float16)
    hm.hopper_matmul(a, b, out=c, programs=3, **hm.VARIANTS[name])        # each cluster walks many tiles
    assert_matmul_close(c, a, b, name)


@pytest.mark.wgmma
@pytest.mark.parametrize("num_ctas, fits", [(1, 132), (2, 66), (4, 30)])
def test_grid_is_what_fits(num_ctas, fits):
    """A persistent grid is sized by the occupancy calculator: on an H200 only 30 clusters of 4 fit."""
    a = torch.randn(8192, 512, device="cuda", dtype=torch.float16)
    b = torch.randn(512, 8192, device="cuda", dtype=torch.float16)
    launch = hm.prepare(a, b, num_ctas=num_ctas)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    assert launch.grid <= sms // num_ctas
    if torch.cuda.get_device_properties(0).name.endswith("H200"):
        assert launch.grid == fits


@pytest.mark.parametrize("M, N, K", [(1, 256, 64), (1, 8, 8), (5, 256, 4096)])
def test_sizes_of_one_compile(M, N, K):
    """A launch turns a size equal to 1 into a constant; every kernel variant must still compile."""
    for cfg in ({}, {"warp_specialize": False}, {"num_ctas": 2}):
        spec = lens.specialise(hm.hopper_matmul_spec(**cfg), M=M, N=N, K=K)
        assert "wgmma.mma_async" in lens.compile(spec, "sm_90a").ptx


BAD_ARGUMENTS = [
    (dict(programs=0), ValueError, "programs"),
    (dict(out=torch.empty(64, 32, dtype=torch.float16)), ValueError, r"out must be a \(64, 64\)"),
    (dict(out=torch.empty(64, 64, dtype=torch.float32)), ValueError, "out must be"),
    (dict(b_transposed=True), ValueError, "stride"),
    (dict(num_ctas=3), ValueError, "1, 2 or 4"),
]


@pytest.mark.parametrize("kwargs, exc, msg", BAD_ARGUMENTS)
@pytest.mark.parametrize("capability", [None, (10, 0)])
def test_arguments_are_checked_before_the_hardware(kwargs, exc, msg, capability):
    """On a CPU, and on a (pretended) Blackwell: a bad argument is reported as such, not as missing hardware."""
    assert_refused_before_hardware(hm.prepare, 64, 64, 64, kwargs, exc, msg, capability)


def test_refused_on_blackwell_and_cpu_before_compiling(monkeypatch):
    """Valid arguments: wgmma is sm_90 only, so a B200 (pretended here) and a CPU are refused, and
    nothing is compiled (compiled for sm_100, wgmma would end the process)."""
    from multicta_kernels.core.hardware import UnsupportedHardwareError
    for k in (hm.hopper_matmul_kernel, hm.pipelined_matmul_kernel):
        monkeypatch.setattr(k, "warmup", lambda *a, **kw: pytest.fail("compiled a wgmma kernel"))
    a = torch.randn(256, 64, dtype=torch.float16)
    for capability in ((10, 0), (10, 3)) + (() if hardware.has(hardware.WGMMA) else (None,)):
        import contextlib
        with hardware.pretend(capability) if capability else contextlib.nullcontext():
            with pytest.raises(UnsupportedHardwareError, match="sm_90 only"):
                hm.hopper_matmul(a, a.T.contiguous())


def test_record_l2_turns_ncu_csv_into_a_result(tmp_path):
    """The recorded L2 table (results/h200/hopper_matmul_l2.json) is rebuilt from ncu's CSV by record_l2."""
    import csv
    from multicta_kernels import results
    names = list(hm_bench.L2_LAUNCHES) + ["cuBLAS"]
    path = tmp_path / "l2.csv"
    with open(path, "w", newline="") as f:
        f.write("==PROF== Connected to process\n")                    # ncu's chatter is skipped
        w = csv.writer(f, quoting=csv.QUOTE_ALL)
        w.writerow(["ID", "Kernel Name", "Grid Size", "Metric Name", "Metric Unit", "Metric Value"])
        for i, _ in enumerate(names):
            for metric, value in (("gpu__time_duration.sum", 1000.0 * (i + 1)), ("lts__t_bytes.sum", 2e9),
                                  ("lts__t_sectors_srcunit_tex_op_read.sum", 1e8), ("dram__bytes_read.sum", 5e8)):
                w.writerow([i, f"kernel_{i}", "(132, 1, 1)", metric, "", f"{value:,.0f}"])
    env = {"gpu": "NVIDIA H200", "date": "2026-11-30", "triton": "3.9.0"}
    out = hm_bench.record_l2(path, tmp_path / "l2.json", env)
    assert [r[0] for r in out["rows"]] == names
    assert out["rows"][1][3] == 2.0 and out["rows"][0][5] == 3.2            # time in us; 1e8 sectors x 32 B
    assert results.load(tmp_path / "l2.json")["benchmark"] == "hopper-matmul-l2"
    path.write_text(path.read_text().rsplit("\n", 5)[0] + "\n")              # a kernel missing: refused
    with pytest.raises(ValueError, match="expected"):
        hm_bench.record_l2(path, tmp_path / "l2b.json", env)


def test_l2_hints_put_a_cache_policy_on_every_tma_instruction():
    """l2_hints=True: evict_last on the A and B loads, evict_first on the C stores; without it, no policy at all."""
    hinted = lens.compile(hm.hopper_matmul_spec(l2_hints=True), "sm_90a").census()
    plain = lens.compile(hm.hopper_matmul_spec(), "sm_90a").census()
    tma = [i for i in hinted if i.startswith("cp.async.bulk.tensor")]
    assert tma and all(i.endswith(".L2::cache_hint") for i in tma)
    assert hinted.get("createpolicy.fractional.L2::evict_last.b64") and hinted.get("createpolicy.fractional.L2::evict_first.b64")
    assert not any("createpolicy" in i or "cache_hint" in i for i in plain)


def test_the_wrapper_picks_the_short_k_configuration_only_up_to_short_k():
    assert hm.pick_config(hm.SHORT_K) == hm.SHORT_K_CONFIG == hm.VARIANTS["ping-pong 128x128, L2 hints"]
    assert hm.pick_config(hm.SHORT_K + 8) == {}
    # by shape: where the ping-pong's 128 x 128 tiles balance the SMs PINGPONG_GAIN times better than the
    # default's 128 x 256; the chapter's 8192 x 8192 shapes keep the default
    assert hm.pick_config(4096, 8192, 8192, sms=132) == {}
    assert hm.pick_config(4096, 2048, 2048, sms=132) == {}                   # 128 tiles on 132 SMs: level
    assert hm.pick_config(4096, 1024, 1024, sms=132) == hm.SHORT_K_CONFIG    # 32 tiles or 64: 0.24 or 0.48
    assert hm.pick_config(4096, 768, 8192, sms=132) == hm.SHORT_K_CONFIG     # 192 tiles: 0.73; 384: 0.97
    assert hm.pick_config(18944, 4096, 3584, sms=132) == {}                  # 0.85 or 0.97: not enough
    assert hm.pick_config(4096, 1536, 1536, sms=132) == {}                   # 72 or 144 tiles: 0.55 both
    assert hm.balance(288, 132) == 288 / 396
    # a gain of exactly 6/5 picks the ping-pong whatever the floating point makes of it (1.1999999999999997 here)
    assert hm.pick_config(4096, 1536, 5888, sms=132) == hm.SHORT_K_CONFIG
    assert hm.pick_config(4096, 3072, 3072, sms=132) == hm.SHORT_K_CONFIG
    assert hm.pick_config(4096, 1024, 1024) == {}                            # no SM count (a dry run): by K
    # split-K: where the ping-pong's tiles fill under half a wave and a split saves SPLIT_K_SAVED of K or more
    assert hm.pick_config(14336, 128, 4096, sms=132) == dict(hm.SPLIT_K_CONFIG, split_k=4)   # 32 tiles x 4
    assert hm.pick_config(16384, 512, 512, sms=132) == dict(hm.SPLIT_K_CONFIG, split_k=8)    # 16 tiles x 8
    assert hm.pick_config(14336, 256, 4096, sms=132) == hm.SHORT_K_CONFIG   # 64 x 2: saves 7168 < 8192
    assert hm.pick_config(1024, 1024, 1024, sms=132) == hm.SHORT_K_CONFIG   # 64 x 2: saves 512
    assert not hm.SPLIT_K_CONFIG["l2_hints"]                                # the partials stay in L2 for the sum
    assert hm.pick_config(4096, 128, 14336, sms=132) == hm.SHORT_K_CONFIG   # 112 tiles: a split would be 2 waves
    assert hm.split_k_for(128, 4096, 28672, sms=64) == 2                    # fewer SMs, fewer slices
    with pytest.raises(ValueError, match="sms must be"):
        hm.pick_config(4096, 1024, 1024, sms=0)
    p = hm.plan(8192, 8192, hm.SHORT_K, dtypes.DTYPES["float16"].gl, **{**hm.CONFIG, **hm.SHORT_K_CONFIG})
    assert (p.consumers, p.block_m, p.block_n, p.l2_hints) == (2, 128, 128, True)
    with pytest.raises(TypeError, match="l2_hints must be True or False, got 'yes'"):
        hm.plan(8192, 8192, 512, dtypes.DTYPES["float16"].gl, **{**hm.CONFIG, "l2_hints": "yes"})


@pytest.mark.parametrize("module, plan_class", [(hm, "HopperPlan"), ("clc", "ClcPlan")])
def test_a_plans_fields_are_its_options(module, plan_class):
    """One list of options per wrapper: the plan's dataclass. CONFIG is its fields after dtype with their defaults,
    and plan() takes exactly those names (any other is refused, naming the known ones)."""
    import dataclasses

    from multicta_kernels import clc_matmul as cm
    from multicta_kernels.core.dtypes import DTYPES
    mod = hm if module is hm else cm
    cls = getattr(mod, plan_class)
    fields = [f for f in dataclasses.fields(cls) if f.name != "dtype"]
    assert list(mod.CONFIG) == [f.name for f in fields] and all(mod.CONFIG[f.name] == f.default for f in fields)
    p = mod.plan(8192, 8192, 4096, DTYPES["float16"].gl)
    assert isinstance(p, cls) and all(getattr(p, k) == v for k, v in mod.CONFIG.items() if v is not None)
    with pytest.raises(TypeError, match=r"unknown options \['tile'\]; known: \[.*'block_k'"):
        mod.plan(8192, 8192, 4096, DTYPES["float16"].gl, tile=3)


def test_the_held_out_shapes_are_outside_the_chapters_sweep_and_plan():
    """``bench hopper-matmul-shapes`` holds the wrapper to shapes it was not tuned on: none is one of the chapter's
    own K sweep (M = N = 8192, K = 512 ... 16384) or its layer shapes, and every configuration it times plans every shape."""
    from triton.experimental.gluon import language as gl
    own = {(8192, 8192, k) for k in (512, 1024, 2048, 4096, 8192, 16384)} | set(hm.MODEL_SHAPES)
    sets = [set(hm_bench.HELD_OUT_SHAPES), set(hm_bench.CHOSE_SHAPES), set(hm_bench.FRESH_SHAPES)]
    assert not own & set.union(*sets) and sum(map(len, sets)) == len(set.union(*sets))
    picks = [bool(hm.pick_config(K, M, N, sms=132)) for M, N, K in hm_bench.FRESH_SHAPES]
    assert any(picks) and not all(picks)                          # both sides of the rule's threshold
    assert {m for m, _, _ in hm_bench.HELD_OUT_SHAPES} >= {128, 512, 16384}     # decode-sized M and a 16K square
    for M, N, K in hm_bench.HELD_OUT_SHAPES + hm_bench.CHOSE_SHAPES + hm_bench.FRESH_SHAPES:
        for cfg in hm_bench.SHAPE_VARIANTS.values():
            hm.plan(M, N, K, gl.float16, **(cfg or hm.pick_config(K)))
    if not hardware.has(hardware.WGMMA):
        from multicta_kernels.core.hardware import UnsupportedHardwareError
        with pytest.raises(UnsupportedHardwareError, match="hopper-matmul-shapes benchmark"):
            hm_bench.shapes_benchmark(quick=True, log=lambda *_: None)
