"""The doctor's self-tests: every live kernel of every chapter on small fresh inputs, checked element by element
against PyTorch (each returns a one-line detail, and raises AssertionError on a wrong element). The notebooks'
live checks call the same functions. Small inputs: the doctor checks that kernels work here, the benchmarks
measure them. ``DEMO``: checks that pass, fail, hang, crash, poison their process or compile slowly, for the
runner's own tests.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass

from ..core import dryrun, hardware
from ..core.accuracy import assert_equal, assert_matmul_close, assert_softmax_close, expect, poisoned
from ..core.hardware import CLUSTERS, CUDA, TCGEN05, WGMMA


@dataclass(frozen=True)
class Check:
    name: str
    chapter: str
    feature: hardware.Feature
    fn: object         # the check itself: returns a one-line detail, raises AssertionError on a wrong answer
    what: str
    phases: bool = True   # compile phase first (kernels compiled, none launched), then the timed run phase


# ------------------------------------------------------------------------------------ the checks
# Each returns a short detail line and raises AssertionError on a wrong element. Small inputs: the
# doctor checks that kernels work here, the benchmarks measure them.

def _sanitized() -> bool:
    """Under the concurrency sanitizer every shared-memory access is checked: keep loops short."""
    return os.environ.get("TRITON_INSTRUMENTATION_MODE") == "consan"


def _shape(M, N, K):
    return (min(M, 130), min(N, 264), min(K, 136)) if _sanitized() else (M, N, K)


def _rand(*shape, dtype="float32"):
    import torch
    return torch.randn(*shape, device=hardware.tensor_device()).to(getattr(torch, dtype))


def _randint(low, high, shape):
    import torch
    return torch.randint(low, high, shape, device=hardware.tensor_device(), dtype=torch.int32)


def check_scale():
    hardware.require(CUDA, "the scale self-test")
    from .. import foundations
    x = _rand(1000)
    y = foundations.scale(x, 3.0)
    assert_equal(y, x * 3.0, "scale")
    return "1000 elements, exact"


def check_persistent_matmul():
    hardware.require(CUDA, "the persistent_matmul self-test")
    import torch
    from .. import foundations
    a, b = _rand(100, 72, dtype="float16"), _rand(72, 90, dtype="float16")
    c = foundations.persistent_matmul(a, b, programs=3)
    if not dryrun.skip_compare("persistent_matmul"):
        torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-3, atol=1e-3)
    return "100x90x72 fp16 in, fp32 out, 3 programs"


def check_tma_double():
    hardware.require(CLUSTERS, "the tma_double self-test")
    from .. import foundations
    a = _rand(64, 96)
    assert_equal(foundations.tma_double(a), a * 2, "tma_double")
    return "64x96, device and host descriptors"


def check_primer():
    hardware.require(CLUSTERS, "the primer self-test")
    from .. import primer
    x = _rand(70, 33)
    for how in primer.HOW:
        y = primer.transpose(x, 2.0, how=how, out=poisoned((33, 70), x.dtype))
        assert_equal(y, 2.0 * x.T, f"primer transpose ({how})")
    for wrapper in (primer.tma_scale, primer.ws_scale):
        for shape in ((100, 72), (1, 8)):                  # edge tiles; one tile, one column of tiles
            a = _rand(*shape, dtype="float16")
            out = wrapper(a, 2.0, out=poisoned(shape, a.dtype))
            assert_equal(out, a * 2, f"primer {wrapper.__name__} {shape[0]}x{shape[1]}")
    return "four transposes 70x33 fp32; TMA ring and warp-specialised ring, 100x72 and 1x8 fp16"


def check_softmax():
    hardware.require(CLUSTERS, "the softmax self-test")
    from ..softmax import make_config, multicta_softmax
    cases = [(1, 1, None), (3, 1000, None), (5, 65536, None), (4, 4096, (4, 4)), (2, 70000, (16, 8))]
    for M, N, shape in cases:
        x = _rand(M, N) * 3
        y = poisoned((M, N), x.dtype)
        cfg = make_config(N, *shape) if shape else None
        multicta_softmax(x, y, config=cfg)
        assert_softmax_close(y, x, f"softmax {M}x{N}")
    x = _rand(7, 3000, dtype="float16")
    y = poisoned((7, 3000), x.dtype)
    multicta_softmax(x, y, config=make_config(3000, 2, 4, dtype="float16"), two_pass=True)
    assert_softmax_close(y, x, "two-pass softmax fp16, 2 CTAs")
    return "1 to 16 CTAs, fused and two-pass, M = 1 and N = 1 included"


def check_exchange():
    hardware.require(CLUSTERS, "the exchange self-test")
    import torch
    from .. import barriers
    for c in (2, 4, 16):
        x = _randint(-1000, 1000, (c, 128))
        for _ in range(1 if _sanitized() else 5):
            assert_equal(barriers.cluster_exchange(x), x + x.sum(0, keepdim=True), f"exchange {c} CTAs")
    return "2, 4, 16 CTAs, 5 repetitions each (1 under the sanitizer)"


def check_ping_pong():
    hardware.require(CLUSTERS, "the ping_pong self-test")
    from .. import barriers
    rounds = 4 if _sanitized() else 500
    for c in ((2, 4) if _sanitized() else (2, 16)):
        errors = barriers.ping_pong(c, rounds).tolist()
        expect(errors == [0] * c, f"ping-pong at {c} CTAs counted errors {errors}")
    return f"{'2 and 4' if _sanitized() else '2 and 16'} CTAs, {rounds} rounds, no stale reads"


def check_pair_sums():
    hardware.require(CLUSTERS, "the pair_sums self-test")
    from .. import barriers
    x = _randint(-10**6, 10**6, (8,))
    assert_equal(barriers.pair_sums(x), x[0::2] + x[1::2], "pair sums")
    return "8 CTAs, 4 pair barriers"


def check_cluster_barrier_in_partition():
    hardware.require(CLUSTERS, "the cluster_barrier_in_partition self-test")
    from .. import barriers
    for c in (2, 16):
        out = barriers.cluster_barrier_in_partition(c)
        hardware.synchronize()
        expect(out.tolist() == [1] * c, f"the worker partitions of {c} CTAs reported {out.tolist()}")
    return "2 and 16 CTAs"


def check_multicast_copy():
    hardware.require(CLUSTERS, "the multicast_copy self-test")
    from .. import multicast as mc
    for c, dtype in ((2, "float16"), (16, "float32")):
        x = _rand(64, 64, dtype=dtype)
        bad, out = mc.multicast_copy(x, c)
        expect(bad.tolist() == [0] * c, f"mismatches per CTA at {c} CTAs: {bad.tolist()}")
        assert_equal(out, x, f"multicast copy {c} CTAs")
    return "2 CTAs fp16, 16 CTAs fp32: every CTA holds the exact tile"


def check_tile_stream():
    hardware.require(CLUSTERS, "the tile_stream self-test")
    from .. import multicast as mc
    tiles = 6 if _sanitized() else 16
    for release in ("cluster", "mbarrier"):
        launch, _ = mc.tile_stream(4, multicast=True, release=release, clusters=2 if _sanitized() else 8, tiles=tiles)
        got = launch().tolist()
        expect(got == [tiles] * len(got), f"release={release}: tiles seen per cluster {got}")
    return "4 CTAs, both releases"


def check_hopper_multicast_matmul():
    hardware.require(WGMMA, "the hopper_multicast_matmul self-test")
    from .. import multicast as mc
    for c, release, shape in ((2, "mbarrier", (200, 136, 72)), (4, "cluster", (1, 256, 512)),
                              (4, "mbarrier", (300, 128, 64))):
        M, N, K = _shape(*shape)
        a, b = _rand(M, K, dtype="float16"), _rand(K, N, dtype="float16")
        assert_matmul_close(mc.hopper_multicast_matmul(a, b, num_ctas=c, release=release), a, b,
                            f"{c} CTAs {release} {M}x{N}x{K}")
    return "2 and 4 CTAs, both releases, M = 1 and K = one block included"


def check_blackwell_multicast_mma():
    hardware.require(TCGEN05, "the blackwell_multicast_mma self-test")
    from .. import multicast as mc
    a, b = _rand(512, 128, dtype="float16"), _rand(128, 128, dtype="float16")
    assert_matmul_close(mc.blackwell_multicast_mma(a, b), a, b, "4-CTA tcgen05 multicast loop")
    return "512x128x128, 4 CTAs (2 pairs)"


def check_mma_tile():
    hardware.require(TCGEN05, "the mma_tile self-test")
    from .. import two_cta
    for two, M in ((False, 128), (True, 256)):
        a, b = _rand(M, 64, dtype="bfloat16"), _rand(64, 128, dtype="bfloat16")
        assert_matmul_close(two_cta.mma_tile(a, b, two_ctas=two), a, b, f"{'2' if two else '1'}-CTA tile")
    return "1-CTA 128x128x64 and 2-CTA 256x128x64, bf16"


def _matmul_cases(matmul, cases, prepare=None, on_launch=None):
    """Each (shape, options) case: fresh fp16 operands, a NaN-poisoned output, element-wise check. With
    ``prepare`` (a wrapper's prepare()), each case is prepared, handed to ``on_launch(launch, options)``, then
    launched."""
    for shape, cfg in cases:
        M, N, K = _shape(*shape)
        a, b = _rand(M, K, dtype="float16"), _rand(K, N, dtype="float16")
        c = poisoned((M, N), a.dtype)
        if prepare is None:
            matmul(a, b, out=c, **cfg)
        else:
            launch = prepare(a, b, c, **cfg)
            if on_launch is not None:
                on_launch(launch, cfg)
            launch()
        assert_matmul_close(c, a, b, f"{matmul.__name__} {M}x{N}x{K} {cfg}")


# The CLC matmul is persistent through cluster launch control: its grid has one cluster per output tile and a
# running cluster takes the tiles of clusters that have not started (try_cancel). Only a grid larger than the
# clusters resident at once makes try_cancel succeed, and only then are answer slots reused, later hand-shake
# rounds run and the ring and accumulators wrap around from tile to tile: chapter 5's path. These shapes give
# each resident cluster several tiles, at 2 and at 4 CTAs, with edge tiles; check_clc_matmul asserts it.
CLC_PERSISTENT = [((4000, 4104, 320), {}), ((4000, 4104, 320), {"cga_layout": ((1, 0), (2, 0))})]
PERSISTENT_FACTOR = 3        # the largest grid at each cluster size is at least this many times the resident clusters


def check_clc_matmul():
    hardware.require(TCGEN05, "the clc_matmul self-test")
    from .. import clc_matmul as cm
    from ..core.occupancy import max_clusters
    cases = [((1000, 776, 328), {}), ((1, 256, 64), {}), ((700, 520, 200), {"cga_layout": ((1, 0), (2, 0))}),
             ((600, 1024, 256), {"block_n": 128, "epilogue_n": 128, "stages": 4})]
    if not _sanitized():                      # under the sanitizer every shared access is checked: small shapes
        cases += CLC_PERSISTENT
    most = {}                                 # cluster size: (grid, resident) of its most persistent case

    def measure(launch, cfg):
        num_ctas = 1 << len(cfg.get("cga_layout", cm.CONFIG["cga_layout"]))
        resident = max_clusters(launch.compile(), num_ctas)    # the occupancy calculator (a bound in a dry run)
        best = most.get(num_ctas)
        if best is None or launch.grid * best[1] > best[0] * resident:
            most[num_ctas] = (launch.grid, resident)
    _matmul_cases(cm.clc_matmul, cases, prepare=cm.prepare, on_launch=measure)
    if _sanitized():
        return "2 and 4 CTAs, edge tiles, M = 1, one sub-tile per tile (persistent grids left out under the sanitizer)"
    for num_ctas, (grid, resident) in sorted(most.items()):
        assert grid >= PERSISTENT_FACTOR * resident, (
            f"the CLC check does not reach the persistent path at {num_ctas} CTAs: its largest grid, {grid} clusters, "
            f"is under {PERSISTENT_FACTOR} x the {resident} resident at once, so try_cancel would seldom succeed")
    return ("2 and 4 CTAs, edge tiles, M = 1, one sub-tile per tile; persistent: "
            + ", ".join(f"{g} clusters of {n} CTAs for {r} resident" for n, (g, r) in sorted(most.items())))


def check_hopper_matmul():
    hardware.require(WGMMA, "the hopper_matmul self-test")
    from .. import hopper_matmul as hm
    # With no options the wrapper picks by K: the short-K ping-pong up to hm.SHORT_K, the 1-CTA kernel above.
    _matmul_cases(hm.hopper_matmul, [((1000, 776, 328), {}), ((1, 256, 64), {}), ((520, 776, 1032), {}),
                                     ((700, 520, 200), {"num_ctas": 4}), ((600, 1024, 256), hm.VARIANTS["ping-pong"]),
                                     ((300, 264, 136), {"warp_specialize": False, "num_ctas": 2}),
                                     ((300, 520, 1000), dict(hm.SPLIT_K_CONFIG, split_k=4)),
                                     ((17, 264, 1024), {"split_k": 2, "num_ctas": 2, "epilogue_n": 64})])
    return "picked by K (both picks), 4 CTAs, ping-pong, non-WS, split-K (ping-pong and 2-CTA), edge tiles, M = 1"


CHECKS = {c.name: c for c in [
    Check("scale", "0", CUDA, check_scale, "a first tl kernel: programs and masks"),
    Check("persistent_matmul", "0", CUDA, check_persistent_matmul, "persistent grouped tl matmul"),
    Check("tma_double", "0", CLUSTERS, check_tma_double, "tl TMA descriptors"),
    Check("primer", "0", CLUSTERS, check_primer, "the Gluon primer: layouts, TMA, warp_specialize"),
    Check("softmax", "1", CLUSTERS, check_softmax, "multi-CTA softmax"),
    Check("exchange", "2", CLUSTERS, check_exchange, "DSMEM all-gather through mbarriers"),
    Check("ping_pong", "2", CLUSTERS, check_ping_pong, "gather/release rounds with phases"),
    Check("pair_sums", "2", CLUSTERS, check_pair_sums, "pair barriers, from_cta broadcast"),
    Check("cluster_barrier_in_partition", "2", CLUSTERS, check_cluster_barrier_in_partition,
       "cluster barrier inside warp_specialize"),
    Check("multicast_copy", "3", CLUSTERS, check_multicast_copy, "TMA multicast into every CTA"),
    Check("tile_stream", "3", CLUSTERS, check_tile_stream, "multicast ring, both releases"),
    Check("hopper_multicast_matmul", "3", WGMMA, check_hopper_multicast_matmul, "TMA multicast -> wgmma loop"),
    Check("blackwell_multicast_mma", "3", TCGEN05, check_blackwell_multicast_mma, "TMA multicast -> tcgen05 loop"),
    Check("mma_tile", "4", TCGEN05, check_mma_tile, "1-CTA and 2-CTA tcgen05 tiles"),
    Check("clc_matmul", "5", TCGEN05, check_clc_matmul, "persistent CLC matmul"),
    Check("hopper_matmul", "6", WGMMA, check_hopper_matmul, "warp-specialised Hopper cluster matmul"),
]}


# A runner that is itself checked: the tests (on a CPU) make these pass, fail, hang, crash, poison their process
# and compile slowly. Like a real check, each does its harm where a kernel would: in the run phase (outside a
# dryrun session), except the slow compile.
_POISONED = []          # what _demo_sticky left behind: every later check in this process fails, as after a sticky CUDA error


def _demo_pass():
    if _POISONED:
        raise RuntimeError(f"this process is unusable: {_POISONED[0]}")
    return "fine"


def _demo_fail():
    expect(False, "element [3, 4] differs")


def _demo_hang():
    if dryrun.active() is None:
        time.sleep(3600)


def _demo_crash():
    if dryrun.active() is None:
        print("about to abort", flush=True)
        os.abort()


def _demo_sticky():
    if dryrun.active() is None:
        _POISONED.append("CUDA error: an illegal instruction was encountered (demo)")
        raise RuntimeError(_POISONED[0])


DEMO_COMPILE_ENV = "MULTICTA_DOCTOR_DEMO_COMPILE_S"


def _demo_slow_compile():
    if dryrun.active() is not None:             # the compile phase: as long as the test asks for
        time.sleep(float(os.environ.get(DEMO_COMPILE_ENV, "3")))
    return "compiled slowly, ran fast"


DEMO = {n: Check(n, "demo", CUDA, fn, n) for n, fn in (
    ("pass", _demo_pass), ("fail", _demo_fail), ("hang", _demo_hang), ("crash", _demo_crash), ("sticky", _demo_sticky),
    ("slow-compile", _demo_slow_compile))}
