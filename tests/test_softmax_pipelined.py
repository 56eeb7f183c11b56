"""Chapter 1's pipelined softmax on the CPU: what one turn of its loop issues, in order (the PTX of sm_90a), the
register budget that make_config enforces for it, the bf16 widening it uses, and the refusals of bad input."""
import numpy as np
import pytest

from multicta_kernels import catalog, lens, softmax


def _loop_body(ptx):
    loops = [lp for lp in lens.loops(ptx) if not lp.dispatch]
    assert len(loops) == 1, f"one loop over the row blocks, found {len(loops)}"
    return [(no, op) for no, op, _ in lens.instructions(ptx) if no in loops[0]]


@pytest.mark.parametrize("num_ctas", [2, 16])
def test_a_turn_loads_the_next_block_before_it_waits_for_the_exchange(num_ctas):
    """One turn of the loop handles two blocks, one per slot. Each block issues its 16-byte loads of the *next*
    block before its stores into the peers and its wait, and its global stores after the wait: the loads stay in
    flight through the exchange. A bar.sync precedes the first st.async of each block (every warp has read the
    other slot); no cluster barrier runs in the loop."""
    body = _loop_body(catalog.compile("softmax_pipelined", "sm_90a", num_ctas=num_ctas).ptx)
    ops = [op for _, op in body]
    assert not any(op.startswith("barrier.cluster") for op in ops), "a cluster barrier in the loop"
    assert not any(op.startswith("fence") for op in ops), "a fence (an init fence) in the loop"
    assert sum(op.startswith("mbarrier.try_wait") for op in ops) == 2, "two waits per turn: one per slot"
    assert sum(op.startswith("st.async") for op in ops) == 4, "two st.async per block"
    kinds = {"ld.global": "load", "mbarrier.arrive.expect_tx": "expect", "st.async": "st.async",
             "mbarrier.try_wait": "wait", "st.global": "store", "bar.sync": "bar.sync"}
    seq = []
    for op in ops:
        kind = next((k for p, k in kinds.items() if op.startswith(p)), None)
        if kind and (not seq or seq[-1] != kind):
            seq.append(kind)
    steps = [k for k in seq if k != "bar.sync"]
    steps = [k for i, k in enumerate(steps) if i == 0 or steps[i - 1] != k]
    assert steps == ["load", "expect", "st.async", "wait", "store"] * 2, steps
    for block in (seq[:seq.index("store") + 1], seq[seq.index("store") + 1:]):
        assert "bar.sync" in block[block.index("load"):block.index("st.async")], f"no bar.sync before st.async: {block}"


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_two_blocks_of_halves_stay_in_registers(dtype):
    """PIPELINED_BYTES_PER_THREAD: 128 half values of one block in fp32 and the next block's loads compile without
    a spill, bf16 too (widened by a shift, not cvt.f32.bf16)."""
    k = catalog.compile("softmax_pipelined", "sm_90a", num_ctas=16, N=262144, dtype=dtype)
    r = k.resources()
    assert r["spill_stores"] == r["spill_loads"] == r["stack"] == 0 and r["registers"] <= 255, r
    assert "cvt.f32.bf16" not in k.ptx


def test_fp32_at_the_register_limit_spills_and_is_refused():
    """128 fp32 values and the next block's 128 spill; make_config refuses it with what to change, and allows 64."""
    spec = softmax.kernel_spec("softmax_pipelined", softmax.softmax_pipelined_kernel, False, 16, 262144, 4, 1,
                               "float32")
    assert lens.compile(spec, "sm_90a").resources()["spill_stores"] > 0
    with pytest.raises(ValueError, match=r"pipelined.*1024 bytes \(limit 768, at most 64 values per thread\)"):
        softmax.make_config(262144, 16, 4, 1, "float32", exchange="pipelined")
    assert softmax.make_config(262144, 16, 8, 1, "float32", exchange="pipelined").values_per_thread == 64


def test_bf16_widened_by_a_shift_is_the_conversion():
    """Every one of the 65536 bf16 bit patterns: sign-extended to 32 bits and shifted left by 16, it is the fp32
    that torch's conversion gives (NaN payloads included)."""
    import torch
    bits = np.arange(-32768, 32768, dtype=np.int16)
    mine = (bits.astype(np.int32) << 16).view(np.float32)
    want = torch.from_numpy(bits.copy()).view(torch.bfloat16).float().numpy()
    assert np.array_equal(mine.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("N, ctas, warps, dtype", [(262144, 8, 8, "float16"), (131072, 4, 8, "bfloat16"),
                                                   (32768, 2, 8, "float32"), (16384, 2, 4, "bfloat16")])
def test_the_corners_of_what_make_config_accepts_do_not_spill(N, ctas, warps, dtype):
    """The largest accepted per-thread loads (128 half values or 64 fp32 values at 8 warps, 128 at 4) compile without
    a spill: the rule is what ptxas allows, not a guess (a reviewer found 16 warps and several rows a program spill,
    which make_config now refuses)."""
    cfg = softmax.make_config(N, ctas, warps, 1, dtype, exchange="pipelined")
    spec = softmax.kernel_spec("softmax_pipelined", softmax.softmax_pipelined_kernel, False, ctas, N, warps, 1, dtype)
    r = lens.compile(spec, "sm_90a").resources()
    assert r["spill_stores"] == r["stack"] == 0, (cfg.explain(), r)


@pytest.mark.parametrize("name", ["softmax_one_round", "softmax_pipelined"])
def test_every_warp_is_past_its_last_wait_before_the_barriers_are_invalidated(name):
    """An mbarrier.inval while another warp still waits on that barrier is undefined (PTX ISA, mbarrier.inval): a
    bar.sync lies between the last try_wait and the first inval (the pipelined kernel's own gl.barrier(); in the
    one-round kernel the compiler's, before the reads of the second buffer)."""
    ptx = catalog.compile(name, "sm_90a", num_ctas=4).ptx
    ops = [op for _, op, _ in lens.instructions(ptx)]
    last_wait = max(i for i, op in enumerate(ops) if op.startswith("mbarrier.try_wait"))
    inval = min(i for i, op in enumerate(ops) if op.startswith("mbarrier.inval"))
    assert last_wait < inval and any(op.startswith("bar.sync") for op in ops[last_wait:inval]), name


@pytest.mark.parametrize("kwargs, msg", [
    (dict(N=4096, num_ctas=1, exchange="pipelined"), "needs a cluster of 2 or more CTAs"),
    (dict(N=65536, num_ctas=4, exchange="fast"), "exchange must be one of"),
    (dict(N=262144, num_ctas=16, dtype="float32", exchange="pipelined"), "holds two blocks per thread"),
    (dict(N=262144, num_ctas=4, num_warps=16, dtype="float16", exchange="pipelined"), "at most 8 warps"),
    (dict(N=8192, num_ctas=2, block_m=4, dtype="float16", exchange="pipelined"), "one row per program"),
    (dict(N=999, num_ctas=2, dtype="float16", exchange="pipelined"), "too short for 2 CTAs x 4 warps .* stacks 2 rows"),
])
def test_make_config_refuses_what_the_pipelined_kernel_cannot_run(kwargs, msg):
    with pytest.raises(ValueError, match=msg):
        softmax.make_config(**kwargs)


def test_refused_before_the_hardware():
    """A 1-CTA configuration with exchange='pipelined', and a config that is not one: one line each, on a CPU too."""
    import torch
    x = torch.zeros(4, 4096)
    with pytest.raises(ValueError, match="needs a cluster of 2 or more CTAs"):
        softmax.multicta_softmax(x, config=softmax.make_config(4096, 1, 4, 1), exchange="pipelined")
    with pytest.raises(TypeError, match="config must be a SoftmaxConfig"):
        softmax.multicta_softmax(x, config={"num_ctas": 2})


def test_the_picker_says_when_it_pipelines():
    """explain() of a pipelined configuration names it; a one-round one does not."""
    assert "pipelined" in softmax.make_config(65536, 4, 4, 1, "float16", exchange="pipelined").explain()
    assert "pipelined" not in softmax.make_config(65536, 4, 4, 1, "float16").explain()
