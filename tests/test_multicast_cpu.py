"""Chapter 3 on the CPU: operand layouts derived from the accumulator's, and input validation."""
import random

import pytest
from random_layouts import random_cga_bases
import torch

from multicta_kernels.gluon import operands
from multicta_kernels import multicast as mc
from multicta_kernels.core.layouts import check_cga_layout


def test_seed_examples():
    assert operands.operand_cga_layouts([(1, 0), (2, 0), (0, 1)]) == ([(1, 0), (2, 0), (0, 0)], [(0, 0), (0, 0), (0, 1)])
    assert operands.operand_cga_layouts([(1, 0), (2, 0)], two_ctas=True) == ([(1, 0), (2, 0)], [(0, 1), (0, 0)])
    assert operands.operand_cga_layouts([(1, 0), (0, 1)], two_ctas=True) == ([(1, 0), (0, 0)], [(0, 1), (0, 2)])


@pytest.mark.parametrize("seed", range(20))
def test_properties_on_random_layouts(seed):
    rng = random.Random(seed)
    acc = [tuple(b) for b in random_cga_bases(rng, rng.randrange(1, 5), 2, zero=0.0)]
    a, b = operands.operand_cga_layouts(acc)
    assert all(x[1] == 0 for x in a) and all(x[0] == 0 for x in b)          # K is never split
    assert [x[0] for x in a] == [m for m, _ in acc] and [x[1] for x in b] == [n for _, n in acc]
    n = 1 << len(acc)
    for c in range(n):                                                      # CTAs needing the same A share M bits
        for d in range(n):
            same_rows = mc.tile_of(acc, c)[0] == mc.tile_of(acc, d)[0]
            assert (mc.tile_of(a, c) == mc.tile_of(a, d)) == same_rows
    if acc[0] == (1, 0):
        a2, b2 = operands.operand_cga_layouts(acc, two_ctas=True)
        assert a2[0] == (1, 0) and b2[0] == (0, 1)
        assert all(x[1] == 0 for x in a2[1:]) and all(x[0] == 0 for x in b2[1:])
        check_cga_layout([list(x) for x in b2 if x != (0, 0)], 1 << sum(1 for x in b2 if x != (0, 0)), 2)


def test_two_ctas_needs_an_m_pair():
    with pytest.raises(ValueError, match="first basis to be \\(1, 0\\)"):
        operands.operand_cga_layouts([(0, 1)], two_ctas=True)


def test_multicast_masks():
    a, b = operands.operand_cga_layouts([(1, 0), (2, 0), (0, 1)])
    assert mc.multicast_mask(a, 0, 8) == 0b00010001          # CTAs 0 and 4 share A's first row block
    assert mc.multicast_mask(b, 0, 8) == 0b00001111          # CTAs 0..3 share B's first column block
    assert mc.receivers(b, 8) == {(0, 0): [0, 1, 2, 3], (0, 1): [4, 5, 6, 7]}


@pytest.mark.parametrize("call, exc, msg", [
    (lambda: mc.multicast_copy(torch.randn(64, 64, dtype=torch.float16), 3), ValueError, "power of two"),
    (lambda: mc.multicast_copy(torch.randn(64, 64, dtype=torch.float16), 1), ValueError, "from 2 to 16"),
    (lambda: mc.multicast_copy(torch.randn(64, 64, dtype=torch.float16), 32), ValueError, "power of two"),
    (lambda: mc.multicast_copy(torch.randint(0, 9, (64, 64), dtype=torch.int32), 2), TypeError, "float16, bfloat16 or float32"),
    (lambda: mc.multicast_copy(torch.randn(64, 64, dtype=torch.float64), 2), TypeError, "float16, bfloat16 or float32"),
    (lambda: mc.multicast_copy(torch.randn(64, 64, dtype=torch.float16).T, 2), ValueError, "stride"),
    (lambda: mc.blackwell_multicast_mma(torch.randn(512, 64, dtype=torch.float16), torch.randn(64, 128, dtype=torch.float16),
                                        acc_bases=((1, 0), (0, 1))), ValueError, "along M only"),
    (lambda: mc.hopper_multicast_matmul(torch.randn(64, 64, dtype=torch.float16), torch.randn(64, 64)),
     TypeError, "must both be float16 or both bfloat16"),
    (lambda: mc.hopper_multicast_matmul(torch.randn(64, 32, dtype=torch.float16), torch.randn(64, 64, dtype=torch.float16)),
     ValueError, "\\(M, K\\) @ \\(K, N\\)"),
    (lambda: mc.hopper_multicast_matmul(torch.randn(64, 64, dtype=torch.float16), torch.randn(64, 64, dtype=torch.float16),
                                        release="sometimes"), ValueError, "release must be"),
    # chapter 3 (issue 22): a relaxed cluster barrier orders no reads, so the matmul (whose threads read the slots)
    # refuses it; a multicast stream needs a release; the stream names the releases it knows
    (lambda: mc.hopper_multicast_matmul(torch.randn(64, 64, dtype=torch.float16), torch.randn(64, 64, dtype=torch.float16),
                                        release="relaxed"), ValueError, "release must be one of \\['cluster', 'mbarrier'\\]"),
    (lambda: mc.tile_stream(4, multicast=True, release="none"), ValueError, "needs multicast=False"),
    (lambda: mc.tile_stream(4, multicast=False, release="fast"), ValueError,
     "release must be one of \\['cluster', 'mbarrier', 'none', 'relaxed'\\]"),
])
def test_bad_input(call, exc, msg):
    """Reported as what it is, on any machine: arguments are checked before the hardware."""
    with pytest.raises(exc, match=msg):
        call()


def test_a_cpu_tensor_on_a_gpu_machine_is_told_to_move():
    from multicta_kernels.core import hardware
    with hardware.pretend((9, 0)) as dev:
        object.__setattr__(dev, "pretended", False)          # a real GPU would see a CPU tensor as misplaced
        with pytest.raises(ValueError, match=r"x.cuda\(\)"):
            mc.multicast_copy(torch.randn(64, 64, dtype=torch.float16), 2)


def test_barriers_are_invalidated_before_the_epilogue_reuses_their_bytes():
    from multicta_kernels import catalog, lens
    k = catalog.compile("blackwell_multicast_mma", "sm_100a")
    assert k.census(["mbarrier.inval"])["mbarrier.inval"] == 2
    for release, count in ((0, 3), (1, 9)):                  # 3 stages: ready; + empty and go with the gather
        k = catalog.compile("hopper_multicast_matmul", "sm_90a", num_ctas=2, release=release)
        assert k.census(["mbarrier.inval"])["mbarrier.inval"] == count




@pytest.mark.parametrize("params", [p for p in __import__("multicta_kernels.catalog").catalog.registered()["tile_stream"]])
def test_tile_stream_compiles_for_a_stream_of_one_tile(params):
    """TILES = 1 once became a constant at launch; with the gather release the barriers then looked
    unused and the compile failed on the H200 ("found at least one mbarrier.init op but could not find
    any mbarrier use"). The counts are kept as runtime values (do_not_specialize)."""
    from multicta_kernels import lens
    spec = lens.specialise(mc.tile_stream_spec(**params), TILES=1, SRC_TILES=1)
    assert spec.signature["TILES"] == "i32"
    lens.compile(spec, "sm_90a")


def test_misaligned_rows_are_refused():
    x = torch.randn(64, 71, dtype=torch.float16)[:, :64]     # rows start every 142 bytes
    with pytest.raises(ValueError, match="16-byte boundaries"):
        mc.multicast_copy(x, 2)


# ------------------------------------------------------------------ chapter 3, issue 22: the stream's releases

def test_stream_variants_are_what_the_recording_holds():
    """Every legal release of the tile stream (STREAM_VARIANTS: own copies none/relaxed/cluster/mbarrier,
    multicast relaxed/cluster/mbarrier) is in results/h200/multicast.json, with its pass-to-pass spread, and no
    illegal one (multicast without a release)."""
    from multicta_kernels import results
    res = results.load("h200/multicast.json")
    assert "spread_pct" in res["columns"] and res["method"]["statistic"].startswith("median of 3 interleaved passes")
    recs = results.records(res)
    got = {(r["num_ctas"], r["multicast"], r["release"]) for r in recs}
    want = {(1, False, "none")} | {(n, m, r) for n in (2, 4, 8, 16) for m in (False, True)
                                   for r in mc.STREAM_VARIANTS[m]}
    assert got == want
    assert all(r["spread_pct"] >= 0 and r["all_tiles_seen"] for r in recs)
    assert "none" not in mc.STREAM_VARIANTS[True]


def test_relaxed_release_is_a_per_tile_rendezvous_that_orders_no_reads():
    """RELEASE_RELAXED: one relaxed cluster barrier per reload (with multicast, one more before the loop:
    sync_inits()); legal because the stream's loop reads nothing from shared memory."""
    from multicta_kernels import lens
    from multicta_kernels.gluon.ring import RELEASE_RELAXED, RELEASES
    assert RELEASES["relaxed"] == RELEASE_RELAXED
    for multicast, once in ((False, 0), (True, 1)):
        ptx = lens.compile(mc.tile_stream_spec(num_ctas=4, multicast=multicast, release=RELEASE_RELAXED), "sm_90a").ptx
        assert lens.per_iteration(ptx, ("barrier.cluster.arrive.relaxed",)) == \
            {"barrier.cluster.arrive.relaxed": (once, 1)}
        assert "ld.shared" not in lens.loop_body(ptx)


@pytest.mark.parametrize("num_ctas, multicast", [(2, True), (16, True), (4, False)])
def test_the_checked_tile_stream_adds_only_the_reads_and_their_proxy_fence(num_ctas, multicast):
    """tile_stream_sums' CHECK path, read in the PTX: per iteration it adds the slot's reads and one
    fence.proxy.async (Triton orders the generic reads before the async proxy's reload of the slot); every
    barrier, init fence and cluster barrier runs as often as in the plain kernel (none per iteration)."""
    import dataclasses
    from multicta_kernels import lens
    from multicta_kernels.lens.ptx import per_iteration
    plain = mc.tile_stream_spec(num_ctas=num_ctas, multicast=multicast, release=1)
    checked = dataclasses.replace(plain, constexprs={**plain.constexprs, **mc.stream_check_layouts(num_ctas)})
    a, b = (lens.compile(s, "sm_90a").ptx for s in (plain, checked))
    runs_a, runs_b = per_iteration(a), per_iteration(b)
    assert runs_b.pop("fence.proxy.async") == (0, 1) and "fence.proxy.async" not in runs_a
    assert runs_b == runs_a and runs_a["fence.mbarrier_init"] == (1, 0)
    assert lens.census(b, ["ld.shared"])["ld.shared"] == 64 and lens.census(a, ["ld.shared"])["ld.shared"] == 0
