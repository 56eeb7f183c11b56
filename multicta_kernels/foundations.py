"""Part 0: Triton foundations, the ground the rest of the book stands on.

Plain ``tl`` kernels: programs and masks, grids, JIT and its cache, TMA descriptors, a persistent
grouped matmul, epilogue sub-tiling, hints, atomics, and a kernel wrapped in
``torch.autograd.Function``. On a GPU they compile and run as usual; on a CPU they run under
Triton's interpreter (the :func:`kernel` decorator builds both), and the lens compiles the very
same functions for sm_90a / sm_100a.
"""
from __future__ import annotations

import contextlib
import os

import triton
import triton.language as tl

from . import lens
from .core import validate
from .core.hardware import CLUSTERS, CUDA, has, require


@contextlib.contextmanager
def _interpret(on: bool):
    saved = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1" if on else "0"
    try:
        yield
    finally:
        if saved is None:
            del os.environ["TRITON_INTERPRET"]
        else:
            os.environ["TRITON_INTERPRET"] = saved


def on_gpu() -> bool:
    return has(CUDA)


def kernel(fn=None, **jit_kwargs):
    """``@triton.jit`` on a GPU; on a CPU, Triton's interpreter (chosen when ``@triton.jit`` runs,
    so the decorator sets ``TRITON_INTERPRET`` just for this kernel). Either way ``.compiled``
    is the real JIT function that the lens compiles."""
    def wrap(f):
        with _interpret(False):
            compiled = triton.jit(f, **jit_kwargs)
        if on_gpu():
            return compiled
        with _interpret(True):
            interpreted = triton.jit(f, **jit_kwargs)
        interpreted.compiled = compiled
        return interpreted
    return wrap(fn) if fn is not None else wrap


def torch_device() -> str:
    """Where Part 0's tensors live: "cuda" on a GPU, "cpu" under Triton's interpreter (not `hardware.device()`,
    which says which GPU this is)."""
    return "cuda" if on_gpu() else "cpu"


# ------------------------------------------------------------------------ programs, grids, masks

@kernel
def where_am_i_kernel(pid_out, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)                      # which program am I?
    offs = pid * BLOCK + tl.arange(0, BLOCK)    # the elements I own
    mask = offs < n                             # the last program may run past the end
    tl.store(pid_out + offs, pid, mask=mask)


def programs_demo(n: int = 10, block: int = 4, kernel=None):
    """Which program writes each element, for n elements in blocks of ``block``; -1 = nobody.
    The output has room for the whole last block, so the masked lanes are visible. ``kernel`` is any
    kernel with ``where_am_i_kernel``'s arguments (your own copy, say); by default that kernel."""
    validate.count(block, "block", high=1 << 16)      # a power of two: Triton says so (Part 0 invites it)
    validate.count(n, "n", high=1 << 20)
    import torch
    grid = triton.cdiv(n, block)
    out = torch.full((grid * block,), -1, dtype=torch.int32, device=torch_device())
    (kernel or where_am_i_kernel)[(grid,)](out, n, BLOCK=block)
    return grid, out.cpu().tolist()


@kernel
def grid_ids_kernel(out):
    i, j, k = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    flat = (k * tl.num_programs(1) + j) * tl.num_programs(0) + i
    tl.store(out + flat, i * 100 + j * 10 + k)


def grid_demo(grid):
    """Run a 1-, 2- or 3-D grid; return each program's (axis 0, 1, 2) ids, flattened axis-0 fastest."""
    import torch
    g = tuple(grid) + (1,) * (3 - len(grid))
    out = torch.full((g[0] * g[1] * g[2],), -1, dtype=torch.int32, device=torch_device())
    grid_ids_kernel[tuple(grid)](out)
    return [(v // 100, v // 10 % 10, v % 10) for v in out.cpu().tolist()]


# ----------------------------------------------------------------------------- JIT and autograd

@kernel
def scale_kernel(x_ptr, y_ptr, n, alpha, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * alpha, mask=mask)


def scale(x, alpha: float, block: int = 1024):
    validate.count(block, "block", high=1 << 16)      # a power of two: Triton says so (Part 0 invites it)
    validate.finite(alpha, "alpha")
    import torch
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise TypeError("scale needs a floating-point torch.Tensor")
    x = x.contiguous()
    y = torch.empty_like(x)
    n = x.numel()
    scale_kernel[(triton.cdiv(n, block),)](x, y, n, alpha, BLOCK=block)
    return y


def _doubling():
    import torch

    class TritonDouble(torch.autograd.Function):
        """y = 2x with a Triton kernel forward and a Triton kernel backward."""

        @staticmethod
        def forward(ctx, x):
            ctx.factor = 2.0                   # any Python object can ride on ctx
            return scale(x, ctx.factor)

        @staticmethod
        def backward(ctx, grad_out):
            return scale(grad_out, ctx.factor)   # d(2x)/dx = 2

    return TritonDouble


def autograd_example(x_value: float = 5.0, target: float = 100.0, weight: float = 3.0, use_triton=True):
    """out = double(x) * w, loss = (out - target)^2. Returns (dloss/dx, dloss/dw)."""
    import torch

    class Double(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            ctx.factor = 2.0
            return x * ctx.factor

        @staticmethod
        def backward(ctx, grad_out):
            (x,) = ctx.saved_tensors           # saved for show: this backward doesn't need x
            return grad_out * ctx.factor

    fn = _doubling() if use_triton else Double
    x = torch.tensor([x_value], requires_grad=True, device=torch_device())
    w = torch.tensor([weight], requires_grad=True, device=torch_device())
    loss = ((fn.apply(x) * w - target) ** 2).sum()
    loss.backward()
    return x.grad.item(), w.grad.item()


# ---------------------------------------------------------------------------------------- TMA

@kernel
def tma_scale_kernel(a_ptr, b_desc, M, N, BM: tl.constexpr, BN: tl.constexpr):
    # Device-side descriptor for A (needs scratch memory: triton.set_allocator);
    # host-side descriptor for B, built with TensorDescriptor.from_tensor.
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, N], strides=[N, 1], block_shape=[BM, BN])
    m, n = tl.program_id(0) * BM, tl.program_id(1) * BN
    b_desc.store([m, n], a_desc.load([m, n]) * 2)


def tma_double(a, bm: int = 32, bn: int = 32):
    validate.tensor(a, "a")
    validate.power_of_two(bm, "bm", 1, 256)
    validate.power_of_two(bn, "bn", 8, 256, " (16-byte TMA rows)")
    import torch
    from triton.tools.tensor_descriptor import TensorDescriptor
    if a.dim() != 2 or a.stride(1) != 1 or (a.stride(0) * a.element_size()) % 16:
        raise ValueError("TMA needs a 2-D tensor with unit inner stride and 16-byte aligned rows")
    if on_gpu():
        require(CLUSTERS, "tma_double (TMA tensor descriptors)")
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8, device=a.device))
    b = torch.empty_like(a)
    M, N = a.shape
    tma_scale_kernel[(triton.cdiv(M, bm), triton.cdiv(N, bn))](a, TensorDescriptor.from_tensor(b, [bm, bn]),
                                                                M, N, BM=bm, BN=bn)
    return b


# ------------------------------------------------------------- a persistent, grouped matmul

@kernel
def persistent_matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, NUM_PROGRAMS,
                             BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    m_tiles, n_tiles = (M + BM - 1) // BM, (N + BN - 1) // BN    # tl.cdiv, spelled out
    num_tiles = m_tiles * n_tiles
    rk = tl.arange(0, BK)
    # Two counters: `tile` is the tile being computed, `prev` the one whose result is still to be
    # stored. The store of tile i-1 is issued after tile i's whole K loop, so it overlaps none of
    # tile i's loads or math; it costs a second accumulator in registers. Overlap needs the next
    # tile's loads issued before the epilogue (a flattened, pipelined loop) and an asynchronous TMA
    # store: see chapter 6.
    prev_m, prev_n = -1, -1
    prev_acc = tl.full((BM, BN), 0.0, tl.float32)
    for tile in range(pid, num_tiles, NUM_PROGRAMS):
        per_group = GROUP_M * n_tiles                         # grouped order (tile_order.grouped)
        first_m = tile // per_group * GROUP_M
        rows = tl.minimum(m_tiles - first_m, GROUP_M)
        tm = first_m + (tile % per_group) % rows
        tn = (tile % per_group) // rows
        rm = tm * BM + tl.arange(0, BM)
        rn = tn * BN + tl.arange(0, BN)
        acc = tl.full((BM, BN), 0.0, tl.float32)
        for k in range(0, K, BK):
            a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :], mask=(rm[:, None] < M) & ((k + rk)[None, :] < K), other=0.0)
            b = tl.load(b_ptr + (k + rk)[:, None] * N + rn[None, :], mask=((k + rk)[:, None] < K) & (rn[None, :] < N), other=0.0)
            acc = tl.dot(a, b, acc)
        if prev_m >= 0:                                       # the epilogue of the previous tile
            pm = prev_m * BM + tl.arange(0, BM)
            pn = prev_n * BN + tl.arange(0, BN)
            tl.store(c_ptr + pm[:, None] * N + pn[None, :], prev_acc, mask=(pm[:, None] < M) & (pn[None, :] < N))
        prev_m, prev_n, prev_acc = tm, tn, acc
    if prev_m >= 0:
        pm = prev_m * BM + tl.arange(0, BM)
        pn = prev_n * BN + tl.arange(0, BN)
        tl.store(c_ptr + pm[:, None] * N + pn[None, :], prev_acc, mask=(pm[:, None] < M) & (pn[None, :] < N))


def num_sms() -> int:
    """SMs of this GPU; on a CPU, the H200's count from the recorded device properties."""
    import torch
    if on_gpu():
        return torch.cuda.get_device_properties(0).multi_processor_count
    from .results import store
    try:
        props = dict(store.load("h200/device.json")["rows"])
    except FileNotFoundError:
        raise FileNotFoundError("no GPU here and no recorded device properties: record them on a GPU with "
                                "python -m multicta_kernels.cli.bench device --out results/h200/device.json") from None
    return int(props["multi_processor_count"])


def persistent_matmul(a, b, *, bm=32, bn=32, bk=32, group_m=4, programs: int | None = None):
    """C = A @ B (fp32 accumulate) with a persistent grid of min(SMs, tiles) programs."""
    import torch
    validate.tensor(a, "a")
    validate.tensor(b, "b")
    for name, v in (("bm", bm), ("bn", bn), ("bk", bk)):
        validate.power_of_two(v, name, 16, 256, " (tl.dot takes blocks of 16 and more)")
    validate.count(group_m, "group_m", high=1 << 16)
    validate.optional_count(programs, "programs", high=1 << 20)
    if a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"need (M, K) @ (K, N), got {tuple(a.shape)} @ {tuple(b.shape)}")
    a, b = a.contiguous(), b.contiguous()
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=torch.float32)
    tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn)
    p = min(programs or num_sms(), tiles)
    persistent_matmul_kernel[(p,)](a, b, c, M, N, K, p, BM=bm, BN=bn, BK=bk, GROUP_M=group_m)
    return c


# -------------------------------------------------------------------------- epilogue sub-tiling

@kernel
def split_epilogue_kernel(x_ptr, y_ptr, BM: tl.constexpr, BN: tl.constexpr):
    r = tl.arange(0, BM)[:, None]
    acc = tl.load(x_ptr + r * BN + tl.arange(0, BN)[None, :])     # stands for a matmul accumulator
    # [BM, BN] -> [BM, 2, BN/2] -> [BM, BN/2, 2] -> two [BM, BN/2] halves
    left, right = acc.reshape(BM, 2, BN // 2).permute(0, 2, 1).split()
    c = tl.arange(0, BN // 2)[None, :]
    tl.store(y_ptr + r * BN + c, left)                 # two stores of half the width: with TMA,
    tl.store(y_ptr + r * BN + BN // 2 + c, right)      # a staging buffer half the size


def split_epilogue(x):
    import torch
    BM, BN = x.shape
    y = torch.empty_like(x)
    split_epilogue_kernel[(1,)](x.contiguous(), y, BM=BM, BN=BN)
    return y


# ------------------------------------------------------------------------- tl.range pipelining

@kernel
def fold_kernel(x_ptr, out_ptr, M, K, BLOCK_M: tl.constexpr, BK: tl.constexpr, STAGES: tl.constexpr):
    # Adds each row's BK-wide chunks element by element: a loop of loads with no tl.dot.
    rows = (tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M))[:, None]
    j = tl.arange(0, BK)[None, :]
    acc = tl.full((BLOCK_M, BK), 0.0, tl.float32)
    for k in tl.range(0, K, BK, num_stages=STAGES):    # STAGES = None: no hint, a plain loop
        acc += tl.load(x_ptr + rows * K + k + j, mask=(rows < M) & (k + j < K), other=0.0)
    tl.store(out_ptr + rows * BK + j, acc, mask=rows < M)


def fold(x, bk: int = 64, block_m: int = 16, stages: int | None = None):
    """Each row of the fp32 matrix ``x`` folded into ``bk`` partial sums (their total is the row's sum)."""
    validate.power_of_two(bk, "bk", 16, 1024)
    validate.power_of_two(block_m, "block_m", 1, 1024)
    validate.optional_count(stages, "stages", high=8)
    import torch
    if not isinstance(x, torch.Tensor) or x.dim() != 2 or x.dtype != torch.float32:
        raise TypeError("fold needs a 2-D float32 torch.Tensor")
    x = x.contiguous()
    M, K = x.shape
    out = torch.empty((M, bk), device=x.device, dtype=torch.float32)
    fold_kernel[(triton.cdiv(M, block_m),)](x, out, M, K, BLOCK_M=block_m, BK=bk, STAGES=stages)
    return out


# ---------------------------------------------------------------------- atomics, hints, metadata

@kernel
def locked_sum_kernel(lock, total, values):
    pid = tl.program_id(0)
    while tl.atomic_cas(lock, 0, 1) == 1:       # spin until we own the lock
        pass
    tl.store(total, tl.load(total) + tl.load(values + pid))   # the critical section
    tl.debug_barrier()                          # all threads of the program are done with it
    tl.atomic_xchg(lock, 0)                     # release


def locked_sum(values):
    import torch
    lock = torch.zeros(1, dtype=torch.int32, device=values.device)
    total = torch.zeros(1, dtype=values.dtype, device=values.device)
    locked_sum_kernel[(values.numel(),)](lock, total, values, num_warps=1)
    return total.item()


def _launch_metadata(grid, metadata, args):
    """What Triton's profiler (proton, through its launch hook) shows for each launch of hinted_copy;
    ``metadata`` is the compiled kernel's metadata, ``args`` the launch's arguments by name."""
    n = args["n"]
    return {"name": f"hinted_copy n={n}", "bytes": 2 * 4 * n}


@kernel(launch_metadata=_launch_metadata)
def hinted_copy_kernel(x_ptr, y_ptr, n, start, BLOCK: tl.constexpr, HINT: tl.constexpr):
    offs = start + tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    if HINT:   # promise: blocks of BLOCK contiguous offsets starting at multiples of BLOCK
        offs = tl.max_contiguous(tl.multiple_of(offs, BLOCK), BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


@kernel
def asin_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.extra.libdevice.asin(tl.load(x_ptr + offs, mask=mask)), mask=mask)


# ------------------------------------------------------------------------------------------ lens

def _tl_spec(name, fn, signature, constexprs, num_warps=4, divisible=(), expect=()):
    return lens.KernelSpec(name=name, fn=fn, signature=signature, constexprs=constexprs,
                           options={"num_warps": num_warps}, language="triton", divisible=divisible, expect=expect)


def scale_spec():
    return _tl_spec("tl_scale", scale_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32", "alpha": "fp32",
                                               "BLOCK": "constexpr"}, {"BLOCK": 1024},
                    divisible=("x_ptr", "y_ptr", "n"), expect=("ld.global.v4", "mul.f32"))


def hinted_copy_spec(hint: bool = True):
    return _tl_spec("tl_hinted_copy", hinted_copy_kernel,
                    {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32", "start": "i32", "BLOCK": "constexpr",
                     "HINT": "constexpr"}, {"BLOCK": 1024, "HINT": hint}, divisible=("x_ptr", "y_ptr", "n"),
                    expect=("ld.global",))


def asin_spec():
    return _tl_spec("tl_asin", asin_kernel, {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
                    {"BLOCK": 1024}, divisible=("x_ptr", "y_ptr"), expect=("ld.global",))


def persistent_matmul_spec():
    return _tl_spec("tl_persistent_matmul", persistent_matmul_kernel,
                    {"a_ptr": "*fp16", "b_ptr": "*fp16", "c_ptr": "*fp32", "M": "i32", "N": "i32", "K": "i32",
                     "NUM_PROGRAMS": "i32", "BM": "constexpr", "BN": "constexpr", "BK": "constexpr",
                     "GROUP_M": "constexpr"}, {"BM": 128, "BN": 128, "BK": 64, "GROUP_M": 8}, num_warps=8,
                    divisible=("a_ptr", "b_ptr", "c_ptr", "M", "N", "K"), expect=("mma",))


def fold_spec(stages: int | None = None):
    """``fold_kernel`` for the lens, with the launch option ``num_stages=3`` in every case: ``stages`` is
    the loop's own ``tl.range(..., num_stages=stages)`` (None: a plain loop)."""
    return lens.KernelSpec(name="tl_fold", fn=fold_kernel, language="triton",
                           signature={"x_ptr": "*fp32", "out_ptr": "*fp32", "M": "i32", "K": "i32",
                                      "BLOCK_M": "constexpr", "BK": "constexpr", "STAGES": "constexpr"},
                           constexprs={"BLOCK_M": 64, "BK": 64, "STAGES": stages},
                           options={"num_warps": 4, "num_stages": 3}, divisible=("x_ptr", "out_ptr", "K"),
                           expect=("add.f32", "st.global"))


def _f32(token: str) -> float:
    """A PTX fp32 immediate, ``0f`` and 8 hex digits: "0f3E2AAC04" -> 0.1667."""
    import struct
    return struct.unpack(">f", bytes.fromhex(token[2:]))[0]


def asin_polynomial(ptx: str) -> dict:
    """What libdevice's fp32 asin compiled to, read from the PTX of ``asin_kernel``: the longest Horner
    chain of ``fma`` whose first step multiplies two constants' registers and which adds a constant at
    every step, and its coefficients (``coeffs``, the constant term first); the ``setp.gt.f32`` thresholds
    (``cuts``); the products of two constants inside one ``fma`` (``constant_products``: pi/2 is one);
    the ``rsqrt`` lines; ``excerpt``, the constants' ``mov`` lines and the chain; and ``taylor``, the
    Taylor series coefficients of (asin(x) - x) / x^3 in t = x^2, as many as ``coeffs``."""
    import math
    const, movs, fmas, cuts, rsqrts = {}, {}, [], set(), []
    for _, op, line in lens.instructions(ptx):
        if " " not in line.strip():
            continue
        dst, *args = [t.strip(" ;") for t in line.split(None, 1)[1].split(",")]
        if op == "mov.b32" and args and args[0].startswith("0f"):
            const[dst], movs[dst] = _f32(args[0]), line.strip()        # a register holding a constant
        elif op.startswith("fma"):
            fmas.append((dst, args, line.strip()))
        elif op == "setp.gt.f32" and args and args[-1].startswith("0f"):
            cuts.add(_f32(args[-1]))
        elif op.startswith("rsqrt"):
            rsqrts.append(line.strip())
    chains = []
    for i, (dst, args, line) in enumerate(fmas):
        if len(args) == 3 and args[0] in const and args[2] in const:    # c_a * t + c_b: the first step
            chain = [(dst, args, line)]
            for d2, a2, l2 in fmas[i + 1:]:
                if a2[0] == chain[-1][0] and a2[2] in const:           # previous * t + a constant
                    chain.append((d2, a2, l2))
            chains.append(chain)
    if not chains:
        raise ValueError("no fma chain over constants in this PTX: is it asin_kernel's?")
    chain = max(chains, key=len)
    coeffs = [const[a[2]] for _, a, _ in chain[1:]][::-1] + [const[chain[0][1][2]], const[chain[0][1][0]]]
    used = dict.fromkeys(r for _, a, _ in chain for r in (a[0], a[2]) if r in const)
    return {"coeffs": coeffs,
            "taylor": [math.comb(2 * n, n) / (4 ** n * (2 * n + 1)) for n in range(1, len(coeffs) + 1)],
            "steps": len(chain), "cuts": sorted(cuts),
            "constant_products": [const[a[0]] * const[a[1]] for _, a, _ in fmas
                                  if a[0] in const and a[1] in const and a[0] != a[1]],
            "rsqrt": rsqrts,
            "excerpt": "\n".join([movs[r] for r in used] + [line for *_, line in chain])}
