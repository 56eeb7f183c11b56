"""Chapter 1's staged softmax: the next row staged in shared memory by TMA while this one is in registers. On the CPU,
what one turn of its loop issues, in order (the PTX of sm_90a), its register and shared-memory budget and its
refusals of bad input; on a GPU, every element against torch in poisoned outputs."""
import re

import pytest
import torch

from multicta_kernels import catalog, lens, softmax
from multicta_kernels.core.accuracy import assert_softmax_close, one_finite_per_row, poisoned

DTYPES = ["float32", "float16", "bfloat16"]


def _loop_body(ptx):
    return [op for _, op, _ in lens.instructions(lens.loop_body(ptx))]   # the row loop (the TMA's `if` is inside)


@pytest.mark.parametrize("num_ctas", [2, 16])
def test_a_turn_issues_the_next_rows_tma_before_the_exchange(num_ctas):
    """One row per turn: wait for the staged row, read it into registers, one bar.sync (every warp has read it),
    the proxy fence, the next row's TMA (one 4-D box: this CTA's whole slice), then the exchange (two st.async, one
    cluster-scoped wait) and the global stores. No cluster barrier and no init fence in the loop: one exchange round
    a row."""
    ops = _loop_body(catalog.compile("softmax_staged", "sm_90a", num_ctas=num_ctas).ptx)
    assert not any(op.startswith("barrier.cluster") for op in ops), "a cluster barrier in the loop"
    assert not any(op.startswith("fence.mbarrier_init") for op in ops), "an init fence in the loop"
    assert sum(op.startswith("cp.async.bulk.tensor.4d") for op in ops) == 1, "one TMA box a row"
    assert sum(op.startswith("st.async") for op in ops) == 2, "two st.async a row"
    waits = [op for op in ops if op.startswith("mbarrier.try_wait")]
    assert len(waits) == 2 and sum(".acquire.cluster" in w for w in waits) == 1, waits
    kinds = {"mbarrier.try_wait.parity.shared::cta": "staged", "ld.shared": "read", "fence.proxy.async": "fence",
             "cp.async.bulk.tensor": "tma", "st.async": "st.async", "mbarrier.try_wait.parity.acquire.cluster": "wait",
             "st.global": "store"}
    seq = []
    for op in ops:
        kind = next((k for p, k in kinds.items() if op.startswith(p)), None)
        if kind and (not seq or seq[-1] != kind):
            seq.append(kind)
    start = seq.index("staged")                     # the loop is rotated: read it from the staged wait on
    turn = seq[start:] + seq[:start]
    firsts = [k for i, k in enumerate(turn) if k not in turn[:i]]
    assert firsts == ["staged", "read", "fence", "tma", "st.async", "wait", "store"], turn


@pytest.mark.parametrize("num_ctas, N, dtype", [(2, 32768, "float32"), (16, 262144, "float32"),
                                                (8, 262144, "bfloat16")])
def test_every_expect_counts_the_bytes_that_land(num_ctas, N, dtype):
    """A barrier's expected bytes are what lands on it, or its phase never completes (a hang) or completes early: on
    `ready`, one TMA box, this CTA's slice of a row (the first row's and every next row's); on `landed`, one fp32 max
    and one fp32 sum from every CTA of the cluster (st.async of 4 bytes each)."""
    ptx = catalog.compile("softmax_staged", "sm_90a", num_ctas=num_ctas, N=N, num_warps=8, dtype=dtype).ptx
    expects = [int(re.search(r",\s*(\d+)\s*;", text).group(1))
               for _, op, text in lens.instructions(ptx) if op.startswith("mbarrier.arrive.expect_tx")]
    stage = N // num_ctas * {"float32": 4, "bfloat16": 2}[dtype]
    assert sorted(expects) == sorted([stage, stage, 2 * num_ctas * 4]), expects
    stores = [op for op in _loop_body(ptx) if op.startswith("st.async")]
    assert len(stores) == 2 and all(op.endswith(".b32") for op in stores), stores


@pytest.mark.parametrize("num_ctas", [2, 16])
def test_the_compilers_own_barriers_order_the_reads_before_the_writes(num_ctas):
    """What makes the kernel's own gl.barrier() redundant in the PTX (the mutation harness's survivor): a bar.sync
    after fence.proxy.async and before the next row's TMA, and one after the last shared-memory read before each
    st.async. The kernel keeps its own barrier so as not to rest on these."""
    ops = _loop_body(catalog.compile("softmax_staged", "sm_90a", num_ctas=num_ctas).ptx)
    fence = next(i for i, op in enumerate(ops) if op.startswith("fence.proxy.async"))
    tma = next(i for i, op in enumerate(ops) if op.startswith("cp.async.bulk.tensor"))
    assert fence < tma and any(op.startswith("bar.sync") for op in ops[fence:tma]), "no bar.sync before the TMA"
    for i, op in enumerate(ops):
        if op.startswith("st.async"):
            sync = max(j for j in range(i) if ops[j].startswith("bar.sync"))
            read = max(j for j in range(i) if ops[j].startswith("ld.shared"))
            assert sync > read, f"st.async at {i}: no bar.sync after the last shared read"


@pytest.mark.parametrize("kw", [dict(num_ctas=16, N=524288, num_warps=16), dict(num_ctas=8, N=262144, num_warps=8),
                                dict(num_ctas=8, N=262144, num_warps=8, dtype="bfloat16"),
                                dict(num_ctas=2, N=65536, num_warps=8)])
def test_the_largest_accepted_rows_do_not_spill_and_fit(kw):
    """128 KiB of staged row a CTA (the most check_staged accepts) and 128 values a thread at 8 warps, 64 at 16,
    compile without a spill, in shared memory a CTA can have."""
    k = catalog.compile("softmax_staged", "sm_90a", **kw)
    r = k.resources()
    assert r["spill_stores"] == r["spill_loads"] == r["stack"] == 0, (kw, r)
    assert k.shared_bytes <= 128 * 1024 + 1024, k.shared_bytes


def test_sixteen_warps_at_128_values_spill_and_are_refused():
    """16 warps have 128 registers a thread: 128 values spill (ptxas says so, with the refusal switched off), and
    make_config refuses them; 8 warps at 128 values are accepted."""
    from unittest import mock
    assert softmax.make_config(524288, 16, 8, 1, "float16", exchange="staged").values_per_thread == 128
    with pytest.raises(ValueError, match="16 warps has 128 registers a thread: 128 values per thread would spill"):
        softmax.make_config(1048576, 16, 16, 1, "float16", exchange="staged")
    with mock.patch.object(softmax, "check_staged", lambda cfg: None):
        spec = softmax.softmax_staged_spec(16, 1048576, 16, "float16")
    assert lens.compile(spec, "sm_90a").resources()["spill_stores"] > 0


@pytest.mark.parametrize("kwargs, msg", [
    (dict(N=4096, num_ctas=1, exchange="staged"), "needs a cluster of 2 or more CTAs"),
    (dict(N=100000, num_ctas=8, exchange="staged"), "rows whose width is a power of two"),
    (dict(N=4096, num_ctas=16, exchange="staged"), "at least 256 columns per CTA"),
    (dict(N=1048576, num_ctas=16, num_warps=16, exchange="staged"), "stages 256 KiB of the row per CTA"),
    (dict(N=1048576, num_ctas=16, num_warps=16, dtype="float16", exchange="staged"), "would spill"),
])
def test_make_config_refuses_what_the_staged_kernel_cannot_run(kwargs, msg):
    with pytest.raises(ValueError, match=msg):
        softmax.make_config(**kwargs)


def test_refused_before_the_hardware():
    """Asked for, rows of another width than the configuration's, rows that do not start on 16 bytes and an x that
    does not: one line each, on a CPU too (before any GPU is asked for)."""
    cfg = softmax.make_config(65536, 4, 4, 1, exchange="staged")
    with pytest.raises(ValueError, match=r"configured for rows of 65536, got N=40000"):
        softmax.multicta_softmax(torch.zeros(2, 40000), config=cfg, exchange="staged")
    with pytest.raises(ValueError, match="rows must start on 16-byte boundaries"):
        softmax.multicta_softmax(torch.zeros(2, 65539)[:, :65536], config=cfg, exchange="staged")
    with pytest.raises(ValueError, match=r"rows may not overlap: x.stride\(0\) = 0 < N = 65536"):
        softmax.multicta_softmax(torch.zeros(1, 65536).expand(3, 65536), config=cfg, exchange="staged")
    with pytest.raises(ValueError, match=r"x must start on a 16-byte boundary .* pass x.clone\(\)"):
        softmax.multicta_softmax(torch.zeros(2 * 65536 + 1)[1:].view(2, 65536), config=cfg, exchange="staged")


def test_a_staged_pick_on_rows_tma_cannot_read_runs_one_round():
    """The picker's staged default on strided or misaligned rows (which the one-round kernel reads) is not refused:
    the call goes on to the hardware check, as it did before the staged kernel (a CPU has none)."""
    from multicta_kernels.core.hardware import UnsupportedHardwareError
    assert softmax.pick_config(65536, "float16").exchange == "staged"
    for x in (torch.zeros(2, 65537, dtype=torch.float16)[:, :65536],
              torch.zeros(2 * 65536 + 1, dtype=torch.float16)[1:].view(2, 65536)):
        with pytest.raises(UnsupportedHardwareError):
            softmax.multicta_softmax(x)
        with pytest.raises(ValueError, match="16-byte boundar"):
            softmax.multicta_softmax(x, exchange="staged")


def test_explain_names_the_staged_row():
    assert "staged" in softmax.make_config(65536, 4, 4, 1, exchange="staged").explain()


def _staged_configs(N, dtype):
    for c in (2, 4, 8, 16):
        for w in (4, 8, 16):
            try:
                yield softmax.make_config(N, c, w, 1, dtype, exchange="staged")
                break
            except ValueError:
                continue


@pytest.mark.clusters
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("M, N", [(1, 65536), (7, 65536), (301, 65536), (29, 131072), (31, 262144), (3, 524288)])
def test_staged_matches_torch(M, N, dtype):
    """Every cluster size that holds the row, as many programs as fit (M above them, at 301 x 65536: several rows
    each, both exchange slots reused), strided rows (16-byte aligned), poisoned outputs; in place at the last of them."""
    x = (torch.randn(M, N + 64, device="cuda") * 3).to(getattr(torch, dtype))[:, :N]
    tried = 0
    for cfg in _staged_configs(N, dtype):
        out = poisoned((M, N), getattr(torch, dtype))
        softmax.multicta_softmax(x, out, config=cfg)
        assert_softmax_close(out, x, f"staged, {cfg.num_ctas} CTAs x {cfg.num_warps} warps, {M}x{N} {dtype}")
        inplace = x.clone()
        softmax.multicta_softmax(inplace, inplace, config=cfg)
        assert_softmax_close(inplace, x, f"staged in place, {cfg.num_ctas} CTAs, {M}x{N} {dtype}")
        tried += 1
    assert tried >= 1, "no configuration was checked"


@pytest.mark.clusters
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shift", [-90.0, -200.0])
def test_staged_rows_far_below_zero_and_minus_inf_but_one(dtype, shift):
    """Rows far below zero, and 301 rows of -inf but one element (more rows than resident clusters: every exchange
    slot and the stage reused): exactly one 1 each, zeros elsewhere."""
    N = 131072
    tdt = getattr(torch, dtype)
    x = (torch.randn(5, N, device="cuda") + shift).to(tdt)
    for cfg in _staged_configs(N, dtype):
        out = poisoned(x.shape, tdt)
        softmax.multicta_softmax(x, out, config=cfg)
        assert_softmax_close(out, x, f"randn {shift:+g}, staged {cfg.num_ctas} CTAs, {dtype}")
    x, want = one_finite_per_row(301, N, [0, N // 3, N - 1, N // 2, N // 5], [0.0, shift, 7.0, -95.0, 1.0], tdt)
    for cfg in _staged_configs(N, dtype):
        out = poisoned(x.shape, tdt)
        softmax.multicta_softmax(x, out, config=cfg)
        assert torch.equal(out, want), f"staged {cfg.num_ctas} CTAs: {int((out != want).sum())} elements differ"
