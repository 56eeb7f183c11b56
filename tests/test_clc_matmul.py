"""Chapter 5's CLC matmul: CPU checks of the kernel's helper, plan validation and refusal, and of
``prepare`` followed up to its launch on a (pretended) Blackwell; on Blackwell, correctness against
torch.matmul including edge tiles, for each cga_layout."""
import math
import re
import types

import pytest
import torch
from triton.experimental.gluon import language as gl

from calls import assert_refused_before_hardware
from multicta_kernels import clc_matmul as cm
from multicta_kernels.benchmarks import clc_matmul as clc_bench
from multicta_kernels import lens
from multicta_kernels.gluon import tile_order
from multicta_kernels.core import hardware
from multicta_kernels.core.accuracy import assert_matmul_close, poisoned
from multicta_kernels.core.hardware import TCGEN05, UnsupportedHardwareError


def test_kernel_snake_helper_matches_python():
    """Run the kernel helper's own source with Python stand-ins for gl.minimum and gl.where."""
    fn = tile_order.snake_tile.fn
    g = fn.__globals__
    saved = g["gl"]
    g["gl"] = types.SimpleNamespace(minimum=min, where=lambda c, a, b: a if c else b)
    try:
        for m in range(1, 10):
            for n in range(1, 10):
                for d in (0, 1):
                    for w in (1, 2, 3, 16):
                        assert [fn(l, m, n, d, w) for l in range(m * n)] == tile_order.planar_snake(m, n, d, w)
    finally:
        g["gl"] = saved


@pytest.mark.parametrize("cfg", [{}, {"cga_layout": ((1, 0), (2, 0))}, {"block_n": 128, "stages": 4},
                                 {"minor_dim": 1, "tile_width": 8}])
def test_configurations_compile_with_their_instructions(cfg):
    k = lens.compile(cm.clc_matmul_spec(**cfg), "sm_100a")
    assert all(k.census(k.spec.expect).values())
    assert k.census(["ld.local"])["ld.local"] == 0


@pytest.mark.parametrize("cfg, msg", [
    ({"cga_layout": ((0, 1),)}, "must start with \\(1, 0\\)"),
    ({"block_m": 96}, "64 or 128"),
    ({"block_n": 512}, "block_n must be a power of two from 16 to 256"),
    ({"block_n": 192, "epilogue_n": 64}, "block_n must be a power of two from 16 to 256 .a TMA box"),
    ({"block_n": 8, "epilogue_n": 8}, "block_n must be a power of two from 16"),
    ({"acc_stages": 3}, "512 columns"),
    ({"epilogue_n": 48}, "epilogue_n must be a power of two from 8 to block_n = 256"),
    ({"block_n": 64, "epilogue_n": 128}, "epilogue_n must be a power of two from 8 to block_n = 64"),
    ({"stages": 0}, "stages must be an integer from 1 to 16, got 0"),
    ({"acc_stages": 0}, "acc_stages must be an integer from 1 to 4, got 0"),
    ({"block_k": 128}, "block_k must be 32 or 64 .a 64- or 128-byte swizzled row., got 128"),
    ({"stages": 9}, "shared memory"),
    ({"cga_layout": ((1, 0), (0, 1))}, "splits the output tile along M only"),
    ({"cga_layout": ((1, 0), (2, 0), (0, 1))}, "splits the output tile along M only"),
])
def test_plan_messages(cfg, msg):
    with pytest.raises(ValueError, match=msg):
        cm.clc_matmul_spec(**cfg)


def test_wrapper_checks_before_hardware():
    a = torch.randn(256, 64, dtype=torch.float16)
    with pytest.raises(TypeError, match="unknown options"):
        cm.clc_matmul(a, a.T.contiguous(), tile=3)
    with pytest.raises(ValueError, match="multiples of 8"):
        cm.clc_matmul(torch.randn(64, 60, dtype=torch.float16), torch.randn(60, 64, dtype=torch.float16))
    with pytest.raises(ValueError, match="stride"):                                   # b transposed
        cm.clc_matmul(a, torch.randn(256, 64, dtype=torch.float16).T)
    with pytest.raises(ValueError, match="out must be"):                              # wrong out dtype
        cm.clc_matmul(a, a.T.contiguous(), out=torch.empty(256, 256, dtype=torch.float32))


@pytest.mark.skipif(hardware.has(TCGEN05), reason="checks the refusal elsewhere")
def test_refused_off_blackwell_before_compiling(monkeypatch):
    monkeypatch.setattr(cm.clc_matmul_kernel, "run", lambda *a, **k: pytest.fail("launched"))
    monkeypatch.setattr(cm.clc_matmul_kernel, "warmup", lambda *a, **k: pytest.fail("compiled"))
    a, b = torch.randn(256, 64, dtype=torch.float16), torch.randn(64, 256, dtype=torch.float16)
    for call in (lambda: cm.clc_matmul(a, b), lambda: cm.prepare(a, b)):
        with pytest.raises(UnsupportedHardwareError, match="sm_100"):
            call()


# ---------------------------------------------------------------------------- prepare, on a CPU

def _a_copy_of_the_kernel():
    """Another @gluon.jit function with the package kernel's parameters (what "Change it and see" writes)."""
    from triton.experimental import gluon
    return gluon.jit(cm.clc_matmul_kernel.fn)


def _not_the_same_parameters():
    from triton.experimental import gluon

    def other(a_desc, b_desc, c_desc, M, N, K):
        pass
    return gluon.jit(other)


PREPARE_BAD_ARGUMENTS = [
    (dict(kernel=lambda *a: None), TypeError, "@gluon.jit"),
    (dict(kernel="clc_matmul_kernel"), TypeError, "@gluon.jit"),
    (dict(kernel=_not_the_same_parameters()), ValueError, "clc_matmul_kernel's parameters"),
    (dict(tile=3), TypeError, "unknown options"),
    (dict(cga_layout=((1, 0), (0, 1))), ValueError, "along M only"),
    (dict(out=torch.empty(256, 128, dtype=torch.float16)), ValueError, r"out must be a \(256, 256\)"),
    (dict(out=torch.empty(256, 256, dtype=torch.float32)), ValueError, "out must be"),
    (dict(b_transposed=True), ValueError, "stride"),
]


@pytest.mark.parametrize("kwargs, exc, msg", PREPARE_BAD_ARGUMENTS)
@pytest.mark.parametrize("capability", [None, (9, 0), (10, 0)])
def test_prepare_checks_arguments_before_the_hardware(kwargs, exc, msg, capability, monkeypatch):
    """On a CPU, on a (pretended) Hopper and on a (pretended) Blackwell: a bad argument, the kernel=
    argument included, is reported as such, not as missing hardware, and nothing is launched."""
    monkeypatch.setattr(cm.clc_matmul_kernel, "run", lambda *a, **k: pytest.fail("launched"))
    assert_refused_before_hardware(cm.prepare, 256, 256, 64, kwargs, exc, msg, capability)


def _recorder(monkeypatch, kernel):
    calls = []
    monkeypatch.setattr(kernel, "run", lambda *a, **kw: calls.append((a, kw)))
    monkeypatch.setattr(kernel, "warmup", lambda *a, **kw: pytest.fail("warmup"))
    return calls


@pytest.mark.parametrize("cga_layout", [((1, 0),), ((1, 0), (2, 0))])
def test_prepare_launches_one_cluster_per_tile_only_when_called(cga_layout, monkeypatch):
    """Followed up to its launch on a (pretended) B200: prepare validates and builds descriptors but launches
    nothing; each launch() launches the kernel once, one cluster per output tile, with the plan's
    constexprs and cluster size, and returns the output it was given."""
    calls = _recorder(monkeypatch, cm.clc_matmul_kernel)
    M, N, K = 1000, 776, 328
    a, b = torch.randn(M, K, dtype=torch.float16), torch.randn(K, N, dtype=torch.float16)
    c = torch.empty(M, N, dtype=torch.float16)
    with hardware.pretend((10, 0), "NVIDIA B200"):
        launch = cm.prepare(a, b, c, cga_layout=cga_layout)
        assert calls == []                                            # preparing launches nothing
        assert launch() is c and launch() is c
    num_ctas = 1 << len(cga_layout)
    tiles = math.ceil(M / (cm.CONFIG["block_m"] * num_ctas)) * math.ceil(N / cm.CONFIG["block_n"])
    assert launch.grid == tiles
    assert len(calls) == 2 and calls[0][1] == calls[1][1]
    args, kw = calls[0]
    assert kw["grid"] == (tiles,) and kw["num_ctas"] == num_ctas and kw["num_warps"] == 4 and not kw["warmup"]
    named = dict(zip(cm.clc_matmul_kernel.arg_names, args))
    assert (named["M"], named["N"], named["K"]) == (M, N, K)
    assert named["c_desc"].base is c and named["a_desc"].block_shape == [cm.CONFIG["block_m"] * num_ctas,
                                                                          cm.CONFIG["block_k"]]
    plan = cm.plan(M, N, K, gl.float16, **{**cm.CONFIG, "cga_layout": cga_layout})
    for name, value in plan.constexprs().items():
        assert named[name] == value, name


def test_prepare_launches_the_kernel_it_is_given(monkeypatch):
    """kernel=: a copy of the kernel (chapter 5's "Change it and see") is launched, the package's is not."""
    mine = _a_copy_of_the_kernel()
    theirs = _recorder(monkeypatch, cm.clc_matmul_kernel)
    calls = _recorder(monkeypatch, mine)
    a, b = torch.randn(512, 64, dtype=torch.float16), torch.randn(64, 512, dtype=torch.float16)
    with hardware.pretend((10, 0), "NVIDIA B200"):
        out = cm.prepare(a, b, kernel=mine)()
    assert theirs == [] and len(calls) == 1 and calls[0][1]["grid"] == (4,)
    assert tuple(out.shape) == (512, 512) and out.dtype == torch.float16


def test_clc_matmul_is_prepare_then_launch(monkeypatch):
    calls = _recorder(monkeypatch, cm.clc_matmul_kernel)
    a, b = torch.randn(300, 64, dtype=torch.float16), torch.randn(64, 600, dtype=torch.float16)
    with hardware.pretend((10, 0), "NVIDIA B200"):
        out = cm.clc_matmul(a, b)
    assert len(calls) == 1 and calls[0][1]["grid"] == (2 * 3,) and tuple(out.shape) == (300, 600)


def test_benchmark_times_prepared_launches(monkeypatch):
    """The clc-matmul benchmark hands sweeps.matmul_sweep prepare()'s launch() for each variant (not the
    one-call wrapper, whose Python front the timer would see)."""
    from multicta_kernels.measure import sweeps
    seen = {}

    def sweep(variants, shapes, log, tag, dtype="float16"):
        seen.update(variants=variants, shapes=shapes)
        return ["M", "N", "K", "cublas_tflops", "torch_tflops"], [[8192, 8192, k, 1.0, 1.0] for _, _, k in shapes]
    prepared = []
    monkeypatch.setattr(sweeps, "matmul_sweep", sweep)
    monkeypatch.setattr(cm, "prepare", lambda a, b, c, **cfg: prepared.append(cfg) or ("launch", cfg))
    with hardware.pretend((10, 0), "NVIDIA B200"):
        result = clc_bench.benchmark(quick=True, log=lambda *_: None)
    assert list(seen["variants"]) == list(cm.VARIANTS) == ["clc_2cta", "clc_4cta"]
    got = [make(None, None, None) for make in seen["variants"].values()]
    assert got == [("launch", cfg) for cfg in cm.VARIANTS.values()] and prepared == list(cm.VARIANTS.values())
    assert [cfg["cga_layout"] for cfg in prepared] == [((1, 0),), ((1, 0), (2, 0))]
    assert "prepare()" in result["method"]["launch"] and [s[2] for s in seen["shapes"]] == [512, 4096]


def test_sizes_of_one_compile():
    """A launch turns M, N or K equal to 1 into a constant (a decode-shaped GEMM has M = 1)."""
    for sizes in ({"M": 1}, {"N": 1}, {"K": 1}):
        spec = lens.specialise(cm.clc_matmul_spec(), **sizes)
        assert "tcgen05.mma" in lens.compile(spec, "sm_100a").ptx


def test_epilogue_staging_index_runs_across_tiles():
    """With one sub-tile per tile (epilogue_n == block_n) the staging buffer must still alternate from
    tile to tile: `store_wait(1)` lets the previous tile's TMA store still read the other buffer. An
    index restarting at every tile is the constant 0 in the compiled TTGIR."""
    k = lens.compile(cm.clc_matmul_spec(block_n=128, epilogue_n=128, stages=4), "sm_100a")
    uses = re.findall(r"ttg\.memdesc_index %c_bufs\[([^\]]+)\]", k.ttgir)
    assert uses and not any(re.fullmatch(r"%c\d+_i32", u) for u in uses), uses


def test_clc_slot_is_released_per_cta_then_by_a_cluster_rendezvous():
    """Each CTA's four readers release its own answer slot; the schedulers then meet at a cluster barrier
    (3.9 lowers it to cluster-scope mbarrier hand-shakes and fences the async proxy) before CTA 0 asks
    again. The PTX shows the rendezvous's release/acquire at cluster scope and the proxy fence."""
    k = lens.compile(cm.clc_matmul_spec(), "sm_100a")
    lines = [ln.strip() for ln in k.ptx.splitlines() if not ln.strip().startswith(".loc")]
    i = next(n for n, ln in enumerate(lines) if "clusterlaunchcontrol.try_cancel" in ln)
    before = lines[max(0, i - 40):i]
    assert any("mbarrier.arrive.release.cluster" in ln for ln in before)
    assert any("mbarrier.try_wait.parity.acquire.cluster" in ln for ln in before)
    assert any("fence.proxy.async.shared::cluster" in ln for ln in before)


def test_makespan_models():
    import random
    rng = random.Random(0)
    for _ in range(50):                       # greedy assignment is never worse than static by more than one tile
        d = [rng.choice([1.0, 1.0, 1.0, 3.0]) for _ in range(rng.randrange(10, 200))]
        w = rng.randrange(1, 17)
        assert cm.makespan(d, w, True) <= cm.makespan(d, w, False) + max(d) + 1e-9
    assert cm.makespan([1.0] * 8, 4, True) == cm.makespan([1.0] * 8, 4, False) == 2.0
    slow = [1.0] * 7 + [0.5]                  # one worker at half speed: static waits for it, dynamic doesn't
    assert cm.makespan([1.0] * 800, 8, False, slow) == 200.0
    assert cm.makespan([1.0] * 800, 8, True, slow) < 110.0
    with pytest.raises(ValueError, match="speeds"):
        cm.makespan([1.0], 2, True, [1.0])


def test_every_configuration_plan_accepts_has_tma_boxes_triton_accepts():
    """plan refuses what a later layer would (operands.check_tma_tensor, Triton's TensorDescriptor): over the
    whole range of block_n and epilogue_n, plan accepts exactly the powers of two whose boxes pass."""
    from multicta_kernels.gluon.operands import check_tma_tensor
    t = torch.empty(1024, 1024, dtype=torch.float16)
    for block_n in range(8, 257, 8):
        for epilogue_n in range(8, block_n + 1, 8):
            try:
                p = cm.plan(1024, 1024, 1024, gl.float16, **{**cm.CONFIG, "block_n": block_n, "epilogue_n": epilogue_n,
                                                             "stages": 2})
            except ValueError as exc:
                assert "block_n" in str(exc) or "epilogue_n" in str(exc), exc
                continue
            check_tma_tensor(t, "b", [p.block_k, p.block_n])
            check_tma_tensor(t, "out", [min(p.tile_m, 256), p.epilogue_n])
            assert block_n in (16, 32, 64, 128, 256) and epilogue_n & (epilogue_n - 1) == 0


@pytest.mark.tcgen05
@pytest.mark.parametrize("cfg", [{"cga_layout": ((1, 0),)}, {"cga_layout": ((1, 0), (2, 0))},
                                 {"block_n": 128, "epilogue_n": 128, "stages": 4},
                                 {"cga_layout": ((1, 0), (2, 0)), "block_n": 64, "epilogue_n": 64}])
@pytest.mark.parametrize("M, N, K, dtype", [(1024, 1024, 512, torch.float16), (1000, 776, 328, torch.float16),
                                            (3000, 2056, 1000, torch.bfloat16), (256, 256, 64, torch.float16),
                                            (1, 256, 4096, torch.float16), (5000, 4096, 64, torch.float16)])
def test_matches_torch(cfg, M, N, K, dtype):
    """Element by element, NaN-poisoned; edge tiles, K of one block, M = 1, one sub-tile per tile at 2 and
    at 4 CTAs, and many tiles per cluster (the epilogue's staging buffers alternate across tiles)."""
    a = torch.randn(M, K, device=hardware.tensor_device()).to(dtype)
    b = torch.randn(K, N, device=hardware.tensor_device()).to(dtype)
    c = poisoned((M, N), dtype)
    cm.clc_matmul(a, b, out=c, **cfg)
    assert_matmul_close(c, a, b, str(cfg))
