#!/usr/bin/env python3
"""A probe for rows that are not a power of two (issue 27): the staged kernel's next row copied by cp.async instead
of TMA, the CTAs' slices balanced (about three minutes on a Hopper GPU)

    bash .device/run python3 tools/record_async_copy_probe.py --out $OUT        # the device machine
    .venv/bin/python tools/record_async_copy_probe.py --out results/h200          # a GPU node

The staged kernel takes rows whose width is a power of two: its TMA box is a CTA's whole slice of the tile. A row of
200000 then runs one round (fp32) or pipelined (fp16, bf16) in a tile of 262144, and the tile's columns are split in
slices of 16384 a CTA: CTAs 0 to 11 hold 16384 columns, CTA 12 holds 3392 and CTAs 13 to 15 none, so the cluster
waits on the full ones. ``probe_kernel`` below is ``softmax_staged_kernel`` with two changes: the next row lands in
shared memory by ``ampere.async_copy.async_load`` (cp.async.cg, 16 bytes a thread at a time, masked: any width; each
thread waits for its own copies with ``wait_group(0)`` and reads back what it copied, then one ``gl.barrier()``
before the next row's copies overwrite the buffer), and CTA ``c`` owns columns ``c * SLICE`` to ``(c + 1) * SLICE``
with ``SLICE = ceil(N / (CTAS * vec)) * vec`` (balanced) or ``SLICE = BLOCK_N // CTAS`` (the tile's split, as the
book's kernels do). It is not one of the book's kernels (no protocol model, no mutation record): a measurement of
what the design would give. For fp32, fp16 and bf16 rows of 50000, 100000 and 200000: the book's pick
(``multicta_softmax`` with ``pick_config``), then the probe at every (CTAs, warps) with 4 or 8 warps that fits (a
CTA's slice of the tile at most 128 KiB and 16 values a thread or more), balanced and not. Every output is checked
against torch before it is timed. Writes ``softmax_async_copy_probe.json``.
"""
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

from triton.experimental import gluon  # noqa: E402
from triton.experimental.gluon import language as gl  # noqa: E402
from triton.experimental.gluon.language.nvidia import hopper  # noqa: E402
from triton.experimental.gluon.language.nvidia.ampere import async_copy  # noqa: E402
from triton.experimental.gluon.language.nvidia.hopper import mbarrier  # noqa: E402

from multicta_kernels import softmax as sm  # noqa: E402
from multicta_kernels.gluon.convert import to_fp32  # noqa: E402
from multicta_kernels.gluon.sync import acquire_wait, sync_inits  # noqa: E402

SHAPES = [(16384, 50000), (16384, 100000), (8192, 200000)]     # every dtype (the fp64 check of wider ones runs out of memory)
COLUMNS = ["dtype", "M", "N", "kernel", "slices", "num_ctas", "num_warps", "resident_clusters", "time_us", "gbps",
           "fraction_of_copy"]
LOG2E = gl.constexpr(1.4426950408889634)


@gluon.jit
def probe_kernel(x_ptr, out_ptr, M, n_div, x_stride_div, out_stride_div, BLOCK_N: gl.constexpr,
                 SLICE: gl.constexpr, ALIGN: gl.constexpr, layout: gl.constexpr, parts: gl.constexpr,
                 parts_smem: gl.constexpr, mine_smem: gl.constexpr, everyone: gl.constexpr,
                 stage_view: gl.constexpr):
    CTAS: gl.constexpr = gl.num_ctas()
    PER_CTA: gl.constexpr = BLOCK_N // CTAS
    N = n_div * ALIGN
    x_stride = gl.to_tensor(x_stride_div).to(gl.int64) * ALIGN
    out_stride = gl.to_tensor(out_stride_div).to(gl.int64) * ALIGN
    cta = gl.arange(0, CTAS, gl.SliceLayout(0, gl.SliceLayout(2, layout)))
    j = gl.arange(0, PER_CTA, gl.SliceLayout(0, gl.SliceLayout(1, layout)))
    cols = cta[None, :, None] * SLICE + j[None, None, :]
    col_ok = (cols < N) & (j[None, None, :] < SLICE)                 # lanes past a balanced slice stay idle
    step = gl.num_programs(0)
    stage = gl.allocate_shared_memory(x_ptr.dtype.element_ty, [1, CTAS, PER_CTA], stage_view)
    m_all = gl.allocate_shared_memory(gl.float32, [2, CTAS, 1, CTAS], parts_smem)
    s_all = gl.allocate_shared_memory(gl.float32, [2, CTAS, 1, CTAS], parts_smem)
    landed = mbarrier.allocate_mbarrier(batch=2)
    mbarrier.init(landed.index(0), count=1)
    mbarrier.init(landed.index(1), count=1)
    sync_inits()
    async_copy.async_load(stage, x_ptr + gl.program_id(0) * x_stride + cols, mask=col_ok)
    async_copy.commit_group()
    i = 0
    for row in range(gl.program_id(0), M, step):
        async_copy.wait_group(0)                                     # my copies of row i have landed
        x = stage.load(layout)                                       # ... and I read back what I copied
        gl.barrier()                                                 # every warp has read the stage
        if row + step < M:
            async_copy.async_load(stage, x_ptr + (row + step) * x_stride + cols, mask=col_ok)
            async_copy.commit_group()
        x = gl.where(col_ok, to_fp32(x), -float("inf"))
        m_cta = gl.max(x, axis=2)
        m_safe = gl.where(m_cta == -float("inf"), 0.0, m_cta)
        e = gl.exp2((x - m_safe[:, :, None]) * LOG2E)
        s_cta = gl.sum(e, axis=2)
        slot = i & 1
        mbarrier.expect(landed.index(slot), 2 * CTAS * 4)
        hopper.async_store(m_all.index(slot), sm._to_every_cta(m_cta, parts), landed.index(slot))
        hopper.async_store(s_all.index(slot), sm._to_every_cta(s_cta, parts), landed.index(slot))
        acquire_wait(landed.index(slot), (i >> 1) & 1)
        m, s = sm._merged(m_all.index(slot).reinterpret(gl.float32, [1, CTAS], mine_smem).load(everyone),
                          s_all.index(slot).reinterpret(gl.float32, [1, CTAS], mine_smem).load(everyone))
        y = sm._normalised(e, m_cta, m, s, layout)
        gl.store(out_ptr + row * out_stride + cols, y.to(out_ptr.dtype.element_ty), mask=col_ok)
        i += 1
    async_copy.wait_group(0)
    gl.barrier()                                                     # every warp is past its last wait
    mbarrier.invalidate(landed.index(0))
    mbarrier.invalidate(landed.index(1))


def slice_of(N: int, cfg, balanced: bool) -> int:
    """Columns a CTA owns: the tile's split, or N spread evenly in whole vectors."""
    return -(-N // (cfg.num_ctas * cfg.vec)) * cfg.vec if balanced else cfg.block_n // cfg.num_ctas


def launch(x, out, cfg, balanced: bool):
    """(run, resident clusters) of probe_kernel on x at cfg, as many clusters as fit at once."""
    M, N = x.shape
    align = sm.alignment(N, x, out, cfg.vec)
    meta = dict(BLOCK_N=cfg.block_n, SLICE=slice_of(N, cfg, balanced), ALIGN=align, layout=cfg.layout,
                **cfg.exchange_layouts(), stage_view=cfg.stage_layouts()["stage_view"], num_warps=cfg.num_warps,
                num_ctas=cfg.num_ctas)
    args = (x, out, M, N // align, x.stride(0) // align, out.stride(0) // align)
    resident = sm.resident_programs(probe_kernel, args, meta, cfg)
    grid = (min(M, resident),)
    return (lambda: probe_kernel[grid](*args, **meta)), resident


def fits(cfg, itemsize: int) -> bool:
    """The staged kernel's limits on a CTA's slice of the tile (check_staged's, less its power-of-two width), and 16
    values a thread or more."""
    per = cfg.block_n // cfg.num_ctas
    return (per * itemsize <= sm.STAGED_MAX_BYTES and per >= sm.STAGED_MIN_PER_CTA
            and cfg.values_per_thread >= 16)


def main(argv=None) -> None:
    import torch
    from record_softmax_phases import save_timed, start
    from record_timelines import say

    from multicta_kernels.core.accuracy import assert_softmax_close
    from multicta_kernels.measure.ceilings import copy_ceiling_gbps
    from multicta_kernels.measure.timing import gbps, time_ms
    out, env, clock = start("record_async_copy_probe", __doc__, argv)
    copy = copy_ceiling_gbps()
    say(f"copy ceiling {copy:.0f} GB/s")
    rows = []
    torch.manual_seed(0)
    for dtype in ("float32", "float16", "bfloat16"):
        for M, N in SHAPES:
            x = torch.randn(M, N, device="cuda", dtype=getattr(torch, dtype))
            y = torch.full_like(x, float("nan"))
            nbytes = 2 * x.numel() * x.element_size()
            pick = sm.pick_config(N, dtype)
            runs = [("pick: " + pick.exchange, None, pick, lambda: sm.multicta_softmax(x, y, config=pick), None)]
            for c in (4, 8, 16):
                for w in (4, 8):
                    try:
                        cfg = sm.make_config(N, c, w, 1, dtype)
                    except ValueError:
                        continue
                    if fits(cfg, x.element_size()):
                        for balanced in (True, False):
                            run, resident = launch(x, y, cfg, balanced)
                            runs.append(("probe", "balanced" if balanced else "tile split", cfg, run, resident))
            for kernel, slices, cfg, run, resident in runs:
                y.fill_(float("nan"))
                run()
                assert_softmax_close(y, x)                           # checked, then timed
                ms = time_ms(run)
                rate = gbps(nbytes, ms)
                rows.append([dtype, M, N, kernel, slices, cfg.num_ctas, cfg.num_warps, resident,
                             round(ms * 1e3, 1), round(rate, 1), round(rate / copy, 4)])
                say(f"[async-copy probe] {dtype} {M} x {N} {kernel} {slices or ''} {cfg.num_ctas}x{cfg.num_warps}: "
                    f"{rate:.0f} GB/s, {rate / copy:.3f} of copy")
            del x, y
            torch.cuda.empty_cache()
    save_timed(out / "softmax_async_copy_probe.json", "softmax-async-copy-probe", env, clock, copy, rows, COLUMNS,
               command="python3 tools/record_async_copy_probe.py --out <dir>",
               kernel="tools/record_async_copy_probe.py probe_kernel (softmax_staged_kernel with the next row by "
                      "cp.async, masked, and SLICE columns a CTA); the pick: multicta_softmax at pick_config(N, dtype)",
               data="torch.randn, seed 0", bytes="2 * M * N * itemsize (read x, write out)",
               checked="every output against torch (assert_softmax_close) before it was timed")


if __name__ == "__main__":
    main()
