"""Stream-K (chapter 6): the schedule walked by the kernel's own program on the CPU, the PTX's release and acquire,
the plan's messages; on a Hopper GPU, element by element against torch in NaN-poisoned outputs, launch after
launch (the flags a launch leaves must be clear for the next)."""
from collections import Counter

import pytest
import torch

from multicta_kernels import hopper_matmul as hm
from multicta_kernels import lens
from multicta_kernels.core.accuracy import assert_matmul_close, poisoned
from multicta_kernels.gluon import tile_order
from multicta_kernels.protocols import program
from triton.experimental.gluon import language as gl

STREAM_K = {"stream-K 128x256": dict(stream_k=True), "stream-K 128x128": dict(stream_k=True, block_n=128, stages=5),
            "stream-K 128x256, 64-column stores": dict(stream_k=True, epilogue_n=64, stages=4)}


@pytest.mark.parametrize("name", sorted(STREAM_K))
@pytest.mark.parametrize("M, N, K, grid", [(300, 520, 1000, 7), (1536, 1536, 1536, 132), (1024, 1024, 1024, 132),
                                           (256, 256, 4096, 5), (128, 256, 64, 3), (130, 8, 128, 4),
                                           (128, 256, 448, 3)])
def test_every_step_is_loaded_once_and_every_tile_stored_once_with_its_later_parts(name, M, N, K, grid):
    """The kernel's own program, run on the CPU for every program of the grid (``program.stream_k_walk``): every
    (tile, K step) is loaded by exactly one program, a program's steps are consecutive in (tile, K) order, and
    every tile is stored once, by the program that loaded its first K step, after it gathered exactly the slots of
    the programs that loaded the tile's other K steps, in K order; a program posts at most once, its own slot,
    before it gathers anything (so a program waits only for later ones that never wait first)."""
    cfg = STREAM_K[name]
    p = hm.plan(M, N, K, gl.float16, **cfg)
    TM, TN, BK = p.tile_m, p.block_n, p.block_k
    steps = -(-K // BK)
    loads, stored, runs = Counter(), Counter(), {}
    walk = program.stream_k_walk(cfg, M, N, K, grid)
    assert len(walk) == hm.stream_k_grid(-(-M // TM) * -(-N // TN) * steps, grid, None)[0], "no empty program"
    order = {(tm * TM, tn * TN): i for i, (tm, tn) in
             enumerate(tile_order.planar_snake(-(-M // TM), -(-N // TN), p.minor_dim, p.tile_width))}
    for prog, w in enumerate(walk):
        ops = w["consumer"]
        posts = [i for i, o in enumerate(ops) if o[0] == "post"]
        gathers = [i for i, o in enumerate(ops) if o[0] == "gather"]
        assert [ops[i] for i in posts] in ([], [("post", prog)]), f"program {prog} posts {[ops[i] for i in posts]}"
        assert not posts or not gathers or posts[0] < gathers[0], f"program {prog} gathers before it posts"
        assert all(ops[i][1] > prog for i in gathers), f"program {prog} waits for an earlier program"
        for (m0, n0, k), nxt in zip(w["loads"], w["loads"][1:]):     # consecutive: K, then the walk's next tile
            assert (nxt[:2] == (m0, n0) and nxt[2] == k + 1) or (
                k == steps - 1 and nxt[2] == 0 and order[nxt[:2]] == order[(m0, n0)] + 1), (prog, k, nxt)
        for m0, n0, k in w["loads"]:
            loads[(m0, n0, k)] += 1
            runs.setdefault((m0, n0), []).append((k, prog))
        stored.update(o[1:] for o in ops if o[0] == "store")
    m_tiles, n_tiles = -(-M // TM), -(-N // TN)
    assert loads == Counter((tm * TM, tn * TN, k) for tm in range(m_tiles) for tn in range(n_tiles)
                            for k in range(steps))
    assert stored == Counter((tm * TM, tn * TN + i * p.epilogue_n) for tm in range(m_tiles) for tn in range(n_tiles)
                             for i in range(p.split))
    for (m0, n0), ks in runs.items():
        in_k_order = [q for _, q in sorted(ks)]
        assert in_k_order == sorted(in_k_order), f"tile ({m0}, {n0}): K order is not program order"
        progs = sorted(set(in_k_order))
        ops = walk[progs[0]]["consumer"]
        at = [i for i, o in enumerate(ops) if o == ("store", m0, n0)]
        assert len(at) == 1, f"tile ({m0}, {n0}) stored {len(at)} times by program {progs[0]}, which loads K step 0"
        since = max([i for i, o in enumerate(ops[:at[0]]) if o[0] == "store"], default=-1)
        gathered = [o[1] for o in ops[since + 1:at[0]] if o[0] == "gather"]
        assert gathered == progs[1:], f"tile ({m0}, {n0}): gathered {gathered}, loaded by {progs}"
        for q in progs[1:]:
            assert ("post", q) in walk[q]["consumer"], f"program {q} loads part of ({m0}, {n0}) but never posts it"


def test_the_grid_gives_every_program_a_run_and_refuses_more_than_fit():
    """Runs as equal as whole steps allow, none empty; more programs than are resident is refused by name."""
    for steps, resident in ((72 * 24, 132), (7, 132), (1, 132), (144, 7), (133, 132)):
        programs, per = hm.stream_k_grid(steps, resident, None)
        assert programs <= min(steps, resident) and (programs - 1) * per < steps <= programs * per, (steps, resident)
    with pytest.raises(ValueError, match=r"programs = 133: stream_k=True needs every program resident.*at most 132"):
        hm.stream_k_grid(1000, 132, 133)
    for bad in ((0, 132, None), (10, 0, None), (10, 132, 0), (10.5, 132, None)):
        with pytest.raises((ValueError, TypeError), match="steps|resident|programs"):
            hm.stream_k_grid(*bad)


@pytest.mark.parametrize("cfg", [dict(stream_k=True, consumers=2, block_n=128), dict(stream_k=True, num_ctas=2),
                                 dict(stream_k=True, split_k=2), dict(stream_k=True, warp_specialize=False),
                                 dict(stream_k=True, persistent=False), dict(stream_k=1),
                                 dict(stream_k=True, block_n=64, stages=3)])
def test_plan_refuses_what_stream_k_does_not_do(cfg):
    with pytest.raises((ValueError, TypeError), match="stream_k"):
        hm.hopper_matmul_spec(**cfg)


def test_the_ptx_releases_each_threads_partial_and_acquires_before_reading():
    """In the consumer's loop: the partial's stores, then one ``atom.release.gpu`` a thread; the poll is relaxed
    loads ended by ``fence.acquire.gpu`` (an acquire pattern, PTX ISA: Memory Consistency Model), before the
    partial's loads; no spills (the slot's addresses are made where they are used)."""
    k = lens.compile(hm.hopper_matmul_spec(stream_k=True), "sm_90a")
    ptx = k.ptx
    assert ptx.count("atom.global.gpu.release.exch.b32") == 1, "one release a thread (a flag each)"
    rel = ptx.index("atom.global.gpu.release.exch.b32")
    post = ptx[ptx.rfind("wgmma.wait_group", 0, rel):rel]          # from the run's last MMA to the release
    assert post.count("st.global.v2.b32") == 128 * 256 // (256 * 2), "the whole partial, then the flag"
    poll = ptx.index("ld.relaxed.gpu.global.b32")
    acq = ptx.index("fence.acquire.gpu", poll)
    first_read = ptx.index("ld.global.v2.b32", acq)
    assert poll < acq < first_read and "ld.global.v2.b32" not in ptx[poll:acq]
    last_read = ptx.rindex("ld.global.v2.b32")
    assert "st.global.b32" in ptx[last_read:ptx.index("cvt.rn.f16x2.f32", last_read)], "the flag cleared after"
    assert k.census(["ld.local", "st.local"]) == {"ld.local": 0, "st.local": 0}
    assert k.shared_bytes <= hm.plan(8192, 8192, 4096, gl.float16, stream_k=True).smem_bytes


def test_each_k_step_runs_the_synchronisation_of_the_default_kernel():
    """Per loop of the PTX (``lens.schedule``): the stream-K producer's loop and its consumer's K-step loops execute
    the same barrier waits, arrives and CTA barriers as the default kernel's, and no init fence or cluster barrier
    enters any loop; what stream-K adds runs once per run (the hand-on) or once per partial gathered."""
    def loops(cfg):
        k = lens.compile(hm.hopper_matmul_spec(**cfg), "sm_90a")
        per = {}
        for r in lens.schedule(k.ptx):
            per.setdefault(r["loop"].source if r["loop"] else "once", Counter())[r["op"]] += 1
        per.pop("once", None)
        return per
    sk, default = loops(dict(stream_k=True)), loops({"num_ctas": 1})
    assert not [op for c in sk.values() for op in c if op.startswith(("fence.mbarrier_init", "barrier.cluster"))]
    same = [c for c in default.values() if "fence.proxy.async" not in c]   # all but the per-tile epilogue's
    assert len(same) == 3 and all(c in list(sk.values()) for c in same), (same, sk)


@pytest.mark.wgmma
@pytest.mark.parametrize("name", sorted(STREAM_K))
@pytest.mark.parametrize("M, N, K, dtype, programs", [(1536, 1536, 1536, torch.float16, None),
                                                      (1000, 776, 1000, torch.bfloat16, None),
                                                      (1024, 1024, 1024, torch.float16, None),
                                                      (300, 520, 1000, torch.float16, 7),
                                                      (256, 256, 4096, torch.bfloat16, 5),
                                                      (1, 256, 512, torch.float16, None),
                                                      (17, 8, 64, torch.bfloat16, None),
                                                      (2048, 2048, 2048, torch.float16, None)])
def test_stream_k_matches_torch_launch_after_launch(name, M, N, K, dtype, programs):
    """Tiles shared by two, by four and by many programs, runs of many tiles with shared ends, edge tiles, M = 1:
    element by element against torch, in an output poisoned with NaN before each of three launches of one
    prepared call with new operands each time and the workspace poisoned with NaN (a flag left set would let the
    next launch read a slot before it is written: the old partial, or NaN); every flag is clear after each launch."""
    a = torch.randn(M, K, device="cuda").to(dtype)
    b = torch.randn(K, N, device="cuda").to(dtype)
    c = poisoned((M, N), dtype)
    launch = hm.prepare(a, b, c, programs=programs, **STREAM_K[name])
    for i in range(3):      # new operands in the same tensors each launch: a stale slot would hold the old ones
        a.copy_(torch.randn(M, K, device="cuda").to(dtype))
        b.copy_(torch.randn(K, N, device="cuda").to(dtype))
        launch.workspace["ws_ptr"].fill_(float("nan"))   # a slot read before its program wrote it: NaN out
        c.fill_(float("nan"))
        launch()
        torch.cuda.synchronize()
        assert_matmul_close(c, a, b, f"{name}, launch {i}")
        assert not launch.workspace["flag_ptr"].any(), "every flag a launch set is cleared for the next"


@pytest.mark.wgmma
def test_more_programs_than_fit_is_refused_before_launch():
    a = torch.randn(512, 512, device="cuda", dtype=torch.float16)
    with pytest.raises(ValueError, match="every program resident"):
        hm.prepare(a, a, programs=10_000, stream_k=True)
