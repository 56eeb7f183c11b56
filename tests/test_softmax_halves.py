"""Chapter 1's softmax in halves: rows wider than the cluster's registers, each CTA's slice held half in registers and
half in shared memory (by TMA), in quarters: quarter 0 loaded by TMA a turn ahead, quarter 1 by ld.global, quarters 2
and 3 by TMA while the previous row is stored. On the CPU, what one turn of its loop issues, in order (the PTX of sm_90a), its
register and shared-memory budget and its refusals of bad input; on a GPU, every element against torch in poisoned
outputs."""
import re

import pytest
import torch

from multicta_kernels import catalog, lens, softmax
from multicta_kernels.core.accuracy import assert_softmax_close, one_finite_per_row, poisoned



def _loop_body(ptx):
    return [op for _, op, _ in lens.instructions(lens.loop_body(ptx))]   # the row loop (the TMA's `if` is inside)


def _turn(ops, kinds, first):
    seq = []
    for op in ops:
        kind = next((k for p, k in kinds.items() if op.startswith(p)), None)
        if kind and (not seq or seq[-1] != kind):
            seq.append(kind)
    start = seq.index(first)                        # the loop is rotated: read it from `first` on
    return seq[start:] + seq[:start]


@pytest.mark.parametrize("kw", [dict(num_ctas=2), dict(num_ctas=16), dict(num_ctas=16, num_warps=16)])
def test_a_turn_loads_the_next_rows_quarters_after_it_read_them(kw):
    """One row per turn: quarter 1's global loads, the wait for quarter 0 and its shared-memory read, then a proxy
    fence and the next row's quarter 0 by TMA (in flight through the whole turn); the wait for quarters 2 and 3, their
    reads (max, then exp written back in place), the exchange (two st.async, one cluster-scoped wait), their stores
    read from shared memory, then the proxy fence and the next row's quarters 2 and 3 (two 5-D boxes), and the first
    half's stores from registers. No cluster barrier and no init fence in the loop: one exchange round a row."""
    ops = _loop_body(catalog.compile("softmax_halves", "sm_90a", **kw).ptx)
    assert not any(op.startswith("barrier.cluster") for op in ops), "a cluster barrier in the loop"
    assert not any(op.startswith("fence.mbarrier_init") for op in ops), "an init fence in the loop"
    assert sum(op.startswith("cp.async.bulk.tensor.5d") for op in ops) == 3, "three TMA boxes a row"
    assert sum(op.startswith("st.async") for op in ops) == 2, "two st.async a row"
    waits = [op for op in ops if op.startswith("mbarrier.try_wait")]
    assert len(waits) == 3 and sum(".acquire.cluster" in w for w in waits) == 1, waits
    kinds = {"ld.global": "load", "mbarrier.try_wait.parity.shared::cta": "ready", "ld.shared": "read",
             "st.shared": "write back", "st.async": "st.async", "mbarrier.try_wait.parity.acquire.cluster": "wait",
             "st.global": "store", "fence.proxy.async": "fence", "cp.async.bulk.tensor": "tma"}
    turn = _turn(ops, kinds, "load")
    firsts = [k for i, k in enumerate(turn) if k not in turn[:i]]
    assert firsts == ["load", "ready", "read", "fence", "tma", "write back", "st.async", "wait", "store"], turn
    readies = [i for i, k in enumerate(turn) if k == "ready"]
    tmas = [i for i, k in enumerate(turn) if k == "tma"]
    assert len(readies) == 2 and readies[0] < tmas[0] < readies[1], "quarter 0's TMA not between the two waits"
    assert turn[readies[0] + 1:tmas[0]] == ["read", "fence"], "quarter 0's TMA not right after its read"
    assert "read" not in turn[tmas[-1]:] and "store" in turn[tmas[-1]:], "the stage read after the next row's TMA"


@pytest.mark.parametrize("kw", [dict(num_ctas=2), dict(num_ctas=16), dict(num_ctas=16, num_warps=16)])
def test_every_value_is_exponentiated_once_and_the_second_half_written_back_once(kw):
    """Per turn, per thread: one ex2 a value (the first half's in registers, the second half's once, written back to
    shared memory as st.shared.v4 and read back for the stores), plus a few for the merge and the scale; quarter 0 read
    from shared memory once, the second half in three passes (max, exp, store; the compiler may keep one 16-value
    chunk in registers between the first two)."""
    cfg = softmax.make_config(65536 * kw["num_ctas"], kw["num_ctas"], kw.get("num_warps", 8), 1, exchange="halves")
    vpt = cfg.values_per_thread                      # each half: this many values a thread
    ops = _loop_body(catalog.compile("softmax_halves", "sm_90a", **kw).ptx)
    ex2 = sum(op.startswith("ex2") for op in ops)
    assert 2 * vpt <= ex2 <= 2 * vpt + 2 * cfg.num_ctas + 4, (ex2, vpt)
    assert sum(op == "st.shared.v4.b32" for op in ops) == vpt // 4, "the exp written back once, 16 bytes a store"
    reads = sum(op == "ld.shared.v4.b32" for op in ops) - cfg.num_ctas // 4       # less the exchange's pair reads
    once, thrice = vpt // 2 // 4, 3 * vpt // 4                   # quarter 0; quarters 2 and 3, 4 values a read
    assert once + thrice - 4 <= reads <= once + thrice, (reads, vpt)


@pytest.mark.parametrize("kw, quarter", [(dict(num_ctas=16), 16384 * 4), (dict(num_ctas=2, N=8192, num_warps=4), 1024 * 4),
                                         (dict(num_ctas=8, N=524288, num_warps=16), 16384 * 4)])
def test_every_expect_counts_the_bytes_that_land(kw, quarter):
    """On `early`, one TMA box, quarter 0 of this CTA's slice; on `ready`, two, quarters 2 and 3 (the first row's and
    every next row's, each); on `landed`, one fp32 max and one fp32 sum from every CTA of the cluster."""
    ptx = catalog.compile("softmax_halves", "sm_90a", **kw).ptx
    expects = [int(re.search(r",\s*(\d+)\s*;", text).group(1))
               for _, op, text in lens.instructions(ptx) if op.startswith("mbarrier.arrive.expect_tx")]
    assert sorted(expects) == sorted([quarter, quarter, 2 * quarter, 2 * quarter, 2 * kw["num_ctas"] * 4]), expects


@pytest.mark.parametrize("num_ctas", [2, 16])
def test_the_compilers_own_barriers_order_the_reads_before_the_writes(num_ctas):
    """What makes the kernel's own gl.barrier() before each TMA redundant in the PTX (the mutation harness's
    survivors): before each of the two TMA issues (quarter 0's; quarters 2 and 3's), a bar.sync between the last
    shared-memory read and fence.proxy.async and one after the fence, before the TMA; and one after the last
    shared-memory read before each st.async. The kernel keeps its own barriers so as not to rest on these."""
    ops = _loop_body(catalog.compile("softmax_halves", "sm_90a", num_ctas=num_ctas).ptx)
    fences = [i for i, op in enumerate(ops) if op.startswith("fence.proxy.async")]
    assert len(fences) == 2, "one proxy fence before each TMA issue"
    reads = [i for i, op in enumerate(ops) if op.startswith("ld.shared")]
    for fence in fences:
        tma = next(i for i in range(fence, len(ops)) if ops[i].startswith("cp.async.bulk.tensor"))
        assert any(op.startswith("bar.sync") for op in ops[fence:tma]), "no bar.sync before the TMA"
        assert any(op.startswith("bar.sync") for op in ops[max(r for r in reads if r < fence):fence]), \
            "no bar.sync between the last stage read and the fence"
    for i, op in enumerate(ops):
        if op.startswith("st.async"):
            sync = max(j for j in range(i) if ops[j].startswith("bar.sync"))
            read = max(j for j in range(i) if ops[j].startswith("ld.shared"))
            assert sync > read, f"st.async at {i}: no bar.sync after the last shared read"


@pytest.mark.parametrize("kw", [dict(num_ctas=16), dict(num_ctas=16, num_warps=16), dict(num_ctas=2),
                                dict(num_ctas=8, N=524288, num_warps=16)])
def test_the_largest_accepted_rows_do_not_spill_and_fit(kw):
    """Rows of 1048576 fp32 over 16 CTAs: 128 KiB a CTA in registers (128 values a thread at 8 warps, 64 at 16) and
    192 KiB in shared memory (the second half, and the next row's quarter 0), without a spill, in shared memory a CTA
    can have (227 KiB)."""
    k = catalog.compile("softmax_halves", "sm_90a", **kw)
    r = k.resources()
    assert r["spill_stores"] == r["spill_loads"] == r["stack"] == 0, (kw, r)
    assert 192 * 1024 <= k.shared_bytes <= 192 * 1024 + 1024, k.shared_bytes


def test_the_values_per_thread_count_the_half_in_registers():
    cfg = softmax.make_config(1048576, 16, 8, 1, exchange="halves")
    assert cfg.values_per_thread == 128 and cfg.chunk == 4096
    assert "halves" in cfg.explain()
    with pytest.raises(ValueError, match="would spill registers"):          # the whole row in registers: 256
        softmax.make_config(1048576, 16, 8, 1)


@pytest.mark.parametrize("kwargs, msg", [
    (dict(N=4096, num_ctas=1, exchange="halves"), "needs a cluster of 2 or more CTAs"),
    (dict(N=100000, num_ctas=8, exchange="halves"), "rows whose width is a power of two"),
    (dict(N=16384, num_ctas=16, exchange="halves"), "at least 512 columns in each quarter"),
    (dict(N=8192, num_ctas=2, num_warps=16, exchange="halves"), "at least 2048 columns in each quarter"),
    (dict(N=1048576, num_ctas=8, num_warps=16, exchange="halves"), "keeps 384 KiB of the row per CTA"),
    (dict(N=1048576, num_ctas=16, num_warps=4, exchange="halves"), "would spill registers"),
    (dict(N=524288, num_ctas=8, num_warps=16, dtype="bfloat16", exchange="halves"), "takes float32 rows"),
])
def test_make_config_refuses_what_the_halves_kernel_cannot_run(kwargs, msg):
    with pytest.raises(ValueError, match=msg):
        softmax.make_config(**kwargs)


@pytest.mark.parametrize("num_warps", [8, 16])
def test_half_types_spill_and_are_refused(num_warps):
    """fp16 spills at 128 values a thread (8 warps) and at 64 (16 warps): ptxas says so with the refusal switched
    off (fp32 at both compiles without a spill, above)."""
    from unittest import mock
    with mock.patch.object(softmax, "check_halves", lambda cfg: None):
        spec = softmax.softmax_halves_spec(8, 524288, num_warps, "float16")
    assert lens.compile(spec, "sm_90a").resources()["spill_stores"] > 0


def test_refused_before_the_hardware():
    """Asked for, rows of another width, rows that do not start on 16 bytes, overlapping rows and an x that does not
    start on 16 bytes: one line each, on a CPU too."""
    cfg = softmax.make_config(65536, 4, 4, 1, exchange="halves")
    with pytest.raises(ValueError, match=r"exchange='halves' was configured for rows of 65536, got N=40000"):
        softmax.multicta_softmax(torch.zeros(2, 40000), config=cfg, exchange="halves")
    with pytest.raises(ValueError, match="rows must start on 16-byte boundaries"):
        softmax.multicta_softmax(torch.zeros(2, 65539)[:, :65536], config=cfg, exchange="halves")
    with pytest.raises(ValueError, match=r"rows may not overlap"):
        softmax.multicta_softmax(torch.zeros(1, 65536).expand(3, 65536), config=cfg, exchange="halves")
    with pytest.raises(ValueError, match=r"x must start on a 16-byte boundary"):
        softmax.multicta_softmax(torch.zeros(2 * 65536 + 1)[1:].view(2, 65536), config=cfg, exchange="halves")


def _halves_configs(N, dtype, warps=(8, 4, 16)):
    for c in (2, 4, 8, 16):
        for w in warps:
            try:
                yield softmax.make_config(N, c, w, 1, dtype, exchange="halves")
                break
            except ValueError:
                continue


@pytest.mark.clusters
@pytest.mark.parametrize("M, N", [(1, 65536), (301, 65536), (29, 262144), (3, 524288), (17, 1048576), (301, 1048576)])
def test_halves_match_torch(M, N, dtype="float32"):
    """Every cluster size that holds the row, strided rows (16-byte aligned), poisoned outputs; M above the resident
    clusters (301 rows: several rows a cluster, both exchange slots and the stage reused); in place at every
    configuration."""
    x = (torch.randn(M, N + 64, device="cuda") * 3).to(getattr(torch, dtype))[:, :N]
    tried = 0
    for cfg in _halves_configs(N, dtype):
        out = poisoned((M, N), getattr(torch, dtype))
        softmax.multicta_softmax(x, out, config=cfg)
        assert_softmax_close(out, x, f"halves, {cfg.num_ctas} CTAs x {cfg.num_warps} warps, {M}x{N} {dtype}")
        inplace = x.clone()
        softmax.multicta_softmax(inplace, inplace, config=cfg)
        assert_softmax_close(inplace, x, f"halves in place, {cfg.num_ctas} CTAs, {M}x{N} {dtype}")
        tried += 1
    assert tried >= 1, "no configuration was checked"


@pytest.mark.clusters
@pytest.mark.parametrize("shift", [-90.0, -200.0])
def test_halves_rows_far_below_zero_and_minus_inf_but_one(shift, dtype="float32"):
    """Rows far below zero, and rows of -inf but one element, in every quarter of a CTA's slice (the two in registers,
    the two in shared memory) at every cluster size that holds the row, over 301 rows (more than the resident clusters: every slot and the stage reused): exactly one 1
    each, zeros elsewhere."""
    N = 262144
    tdt = getattr(torch, dtype)
    x = (torch.randn(5, N, device="cuda") + shift).to(tdt)
    for cfg in _halves_configs(N, dtype):
        out = poisoned(x.shape, tdt)
        softmax.multicta_softmax(x, out, config=cfg)
        assert_softmax_close(out, x, f"randn {shift:+g}, halves {cfg.num_ctas} CTAs, {dtype}")
    x, want = one_finite_per_row(301, N, [0, N // 3, N - 1, N // 2, N // 2 - 1, N // 5, N // 8 + 3, N // 2 + N // 32 + 5],
                                 [0.0, shift, 7.0, -95.0, 3.0, 1.0, -1.0], tdt)
    for cfg in _halves_configs(N, dtype):
        out = poisoned(x.shape, tdt)
        softmax.multicta_softmax(x, out, config=cfg)
        assert torch.equal(out, want), f"halves {cfg.num_ctas} CTAs: {int((out != want).sum())} elements differ"
