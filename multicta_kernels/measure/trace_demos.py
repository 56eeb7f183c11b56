"""Two small kernels that show what a timeline records, and their checked launches (``tools/record_timelines.py``).

``center_rows_kernel`` (a row per cluster, a cross-CTA sum) and ``tma_handoff_kernel`` (a loader partition
and a reducer, an event spanning each TMA load from issue to the wait that sees it): not chapter kernels, so
not in the catalog.
"""
from __future__ import annotations

import triton.profiler.language as pl
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma

from .. import lens
from ..core.hardware import CLUSTERS, check_cluster_size, check_on_gpu, log2, require
from ..core import validate
from ..gluon.scope import scope


@gluon.jit
def center_rows_kernel(x_ptr, out_ptr, N, BLOCK: gl.constexpr, layout: gl.constexpr,
                       INSTRUMENT: gl.constexpr):
    """out[r] = x[r] - mean(x[r]). One cluster per row; ``layout`` splits the row over its CTAs,
    so the sum is a cross-CTA reduction."""
    row = gl.program_id(0).to(gl.int64)
    cols = gl.arange(0, BLOCK, layout)
    mask = cols < N
    with scope("load", INSTRUMENT):
        x = gl.load(x_ptr + row * N + cols, mask=mask, other=0.0)
    with scope("cross_cta_sum", INSTRUMENT):
        mean = gl.sum(x, axis=0) / N
    with scope("store", INSTRUMENT):
        gl.store(out_ptr + row * N + cols, x - mean, mask=mask)


@gluon.jit
def _handoff_reducer(desc, bufs, ready, event, out_ptr, TILES: gl.constexpr, INSTRUMENT: gl.constexpr):
    layout: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [4, 1], [1, 0])
    acc = gl.zeros(desc.block_shape, gl.float32, layout)
    for t in gl.static_range(TILES):
        with scope("wait", INSTRUMENT):
            mbarrier.wait(ready.index(t), 0)
        if INSTRUMENT:
            pl.end_event(event)              # this warp has seen tile t land
        with scope("add", INSTRUMENT):
            acc += bufs.index(t).load(layout).to(gl.float32)
    gl.store(out_ptr + gl.program_id(0), gl.sum(gl.sum(acc, axis=1), axis=0))


@gluon.jit
def _handoff_loader(desc, bufs, ready, event, TILES: gl.constexpr, INSTRUMENT: gl.constexpr):
    ROWS: gl.constexpr = desc.block_shape[0]
    for t in gl.static_range(TILES):
        with scope("issue", INSTRUMENT):
            mbarrier.expect(ready.index(t), desc.nbytes_per_cta)
            if INSTRUMENT:
                pl.start_event(event)        # tile t is in flight from here
            tma.async_load(desc, [(gl.program_id(0) * TILES + t) * ROWS, 0], ready.index(t), bufs.index(t))


@gluon.jit
def tma_handoff_kernel(desc, out_ptr, TILES: gl.constexpr, INSTRUMENT: gl.constexpr):
    """out[p] = sum of TILES tiles: a loader partition issues one TMA load per tile, the default
    partition waits for each and adds it up. The event ``tma_in_flight`` spans issue -> seen."""
    bufs = gl.allocate_shared_memory(desc.dtype, [TILES] + desc.block_shape, desc.layout)
    ready = mbarrier.allocate_mbarrier(batch=TILES)
    for t in gl.static_range(TILES):
        mbarrier.init(ready.index(t), count=1)
    event = pl.allocate_event("tma_in_flight") if INSTRUMENT else 0
    gl.warp_specialize([(_handoff_reducer, (desc, bufs, ready, event, out_ptr, TILES, INSTRUMENT)),
                        (_handoff_loader, (desc, bufs, ready, event, TILES, INSTRUMENT))], [4], [48])


HANDOFF = dict(tiles=4, rows=32, cols=64, num_warps=4, worker_warps=(4,), names=("reducer", "loader"))


def _row_layout(block: int, num_ctas: int, num_warps: int = 4):
    per_thread = max(1, block // (32 * num_warps * num_ctas))
    return gl.BlockedLayout([per_thread], [32], [num_warps], [0],
                            cga_layout=[[1 << i] for i in range(log2(num_ctas))])


def _handoff_layout():
    return gl.NVMMASharedLayout.get_default_for([HANDOFF["rows"], HANDOFF["cols"]], gl.float16)


def demo_spec(num_ctas: int = 1, instrument: bool = False, N: int = 1024) -> lens.KernelSpec:
    """``center_rows_kernel`` as the lens compiles it (not in the lens registry: not a chapter kernel)."""
    validate.cluster_size(num_ctas)
    validate.boolean(instrument, "instrument")
    validate.count(N, "N", high=1 << 20)
    check_cluster_size(num_ctas)
    block = max(1 << (N - 1).bit_length(), 128 * num_ctas)
    return lens.KernelSpec(
        "center_rows", center_rows_kernel,
        {"x_ptr": "*fp32", "out_ptr": "*fp32", "N": "i32", "BLOCK": "constexpr", "layout": "constexpr",
         "INSTRUMENT": "constexpr"},
        {"BLOCK": block, "layout": _row_layout(block, num_ctas), "INSTRUMENT": instrument},
        {"num_warps": 4, "num_ctas": num_ctas}, targets=("sm_90a", "sm_100a"),
        divisible=("x_ptr", "out_ptr") + (("N",) if N % 16 == 0 else ()))


def handoff_spec(instrument: bool = False) -> lens.KernelSpec:
    """``tma_handoff_kernel`` for the lens. With ``instrument=True`` compile it through
    :func:`instrumented`: its event cannot be compiled without proton's instrumentation."""
    h = HANDOFF
    desc = f"tensordesc<fp16[{h['rows']},{h['cols']}],{_handoff_layout()!r}>"
    return lens.KernelSpec("tma_handoff", tma_handoff_kernel,
                           {"desc": desc, "out_ptr": "*fp32", "TILES": "constexpr", "INSTRUMENT": "constexpr"},
                           {"TILES": h["tiles"], "INSTRUMENT": instrument}, {"num_warps": h["num_warps"]})


# ------------------------------------------------------------------------------ on a GPU

def center_rows(x, out=None, *, num_ctas: int = 1, instrument: bool = False):
    """``x - x.mean(1, keepdim=True)`` for a 2-D fp32 CUDA tensor, one cluster of ``num_ctas`` CTAs
    per row, through the JIT (what :func:`record` needs: it compiles inside the session)."""
    spec, grid, args = center_rows_args(x, out, num_ctas=num_ctas, instrument=instrument)
    center_rows_kernel[grid](*args, **spec.options)
    return args[1]


def center_rows_args(x, out=None, *, num_ctas: int = 1, instrument: bool = False):
    """Checked arguments of ``center_rows_kernel``: (spec, grid, args), for a launch or :func:`prepare`."""
    import torch
    if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.dtype != torch.float32:
        raise TypeError("x must be a 2-D float32 torch.Tensor")
    check_cluster_size(num_ctas)
    M, N = x.shape
    if not 1 <= N <= 16384 or not x.is_contiguous():
        raise ValueError(f"rows must be contiguous and hold 1 to 16384 elements, got shape {tuple(x.shape)}")
    out = torch.empty_like(x) if out is None else _checked_out(out, x.shape, torch.float32, x.device)
    require(CLUSTERS, "the timeline demo (thread-block clusters)")
    check_on_gpu(x, "x")
    spec = demo_spec(num_ctas, instrument, N)
    return spec, (M,), [x, out, N, *spec.constexprs.values()]


def _checked_out(out, shape, dtype, device):
    if tuple(out.shape) != tuple(shape) or out.dtype != dtype or out.device != device or not out.is_contiguous():
        raise ValueError(f"out must be a contiguous {dtype} tensor of shape {tuple(shape)} on {device}, got "
                         f"{out.dtype} {tuple(out.shape)} on {out.device}")
    return out


def tma_handoff(x, out=None, *, instrument: bool = False):
    """Per-program sums of ``HANDOFF["tiles"]`` tiles of 32 x 64 fp16 rows of ``x`` (fp32 out)."""
    spec, grid, args = tma_handoff_args(x, out, instrument=instrument)
    tma_handoff_kernel[grid](*args, **spec.options)
    return args[1]


def tma_handoff_args(x, out=None, *, instrument: bool = False):
    """Checked arguments of ``tma_handoff_kernel``: (spec, grid, args)."""
    import torch
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
    h = HANDOFF
    rows_per_program = h["tiles"] * h["rows"]
    if not isinstance(x, torch.Tensor) or x.dtype != torch.float16 or x.dim() != 2 or x.shape[1] != h["cols"]:
        raise TypeError(f"x must be a 2-D float16 tensor with {h['cols']} columns")
    if x.shape[0] % rows_per_program or not x.is_contiguous():
        raise ValueError(f"x must be contiguous with a multiple of {rows_per_program} rows")
    programs = x.shape[0] // rows_per_program
    out = torch.empty(programs, device=x.device, dtype=torch.float32) if out is None else \
        _checked_out(out, (programs,), torch.float32, x.device)
    require(CLUSTERS, "the TMA hand-off demo (TMA and warp specialisation)")
    check_on_gpu(x, "x")
    desc = TensorDescriptor.from_tensor(x, [h["rows"], h["cols"]], _handoff_layout())
    return handoff_spec(instrument), (programs,), [desc, out, *handoff_spec(instrument).constexprs.values()]
