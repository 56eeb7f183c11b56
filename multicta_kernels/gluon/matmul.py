"""The validated front end of the persistent matmul wrappers (chapters 5 and 6) and their lens spec."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .. import lens
from ..core.hardware import TMA_BOX_MAX, check_on_gpu, require
from .operands import check_operands, check_tma_tensor, descriptor_type


def matmul_spec(name, kernel, plan, num_warps: int, targets: tuple, expect: tuple,
                extra: dict | None = None) -> lens.KernelSpec:
    """The lens spec of a persistent matmul from its plan (an 8192 x 8192 x 4096 problem's descriptors).
    ``extra``: the types of the kernel's other runtime arguments, by name."""
    known = {"a_desc": descriptor_type(plan.dtype, [plan.tile_m, plan.block_k], plan.a),
             "b_desc": descriptor_type(plan.dtype, [plan.block_k, plan.block_n], plan.b),
             "c_desc": descriptor_type(getattr(plan, "out_dtype", plan.dtype), [plan.tile_m, plan.epilogue_n],
                                       plan.c),
             "M": "i32", "N": "i32", "K": "i32", **(extra or {}), **{k: "constexpr" for k in plan.constexprs()}}
    names = getattr(kernel, "arg_names", list(known))
    sig = {n: known[n] for n in names if n in known}
    return lens.KernelSpec(name, kernel, sig, plan.constexprs(), {"num_warps": num_warps, "num_ctas": plan.num_ctas},
                           targets=targets, expect=expect,      # pointers 16-byte aligned, as a launch specialises
                           divisible=tuple(n for n, t in (extra or {}).items() if t.startswith("*")))


def options(plan_class) -> dict:
    """A plan's options with their defaults, read from the plan's dataclass: every field after ``dtype``. The
    dataclass is the one list of a wrapper's options (``CONFIG`` is this dict)."""
    return {f.name: f.default for f in dataclasses.fields(plan_class) if f.name != "dtype"}


def with_defaults(given: dict, known: dict, what: str) -> dict:
    """``known`` (the defaults) overridden by ``given``; an option that is not a field of the plan is refused
    with a TypeError that names the known ones."""
    unknown = set(given) - set(known)
    if unknown:
        raise TypeError(f"{what}: unknown options {sorted(unknown)}; known: {sorted(known)}")
    return {**known, **given}


@dataclass(frozen=True)
class MatmulCall:
    """One validated call of a persistent matmul wrapper: its plan, output and descriptors."""
    plan: object
    out: object
    a_desc: object
    b_desc: object
    c_desc: object
    M: int
    N: int
    K: int
    partials: object = None     # split-K: the fp32 workspace the epilogue stores (c_desc is over it), or None


def check_out(out, M: int, N: int, dtype, box) -> None:
    """A given output: an (M, N) tensor of the operands' dtype that TMA can store ``box`` tiles into."""
    import torch
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (M, N) or out.dtype != dtype:
        got = f"{tuple(out.shape)} {out.dtype}" if isinstance(out, torch.Tensor) else type(out).__name__
        raise ValueError(f"out must be a ({M}, {N}) {dtype} tensor, got {got}")
    check_tma_tensor(out, "out", box)


def prepare_matmul(a, b, out, plan, feature, what: str, partials: tuple | None = None) -> MatmulCall:
    """The shared front of the persistent matmul wrappers, after the wrapper made its ``plan`` (which validated
    the operands' sizes and the configuration): the TMA constraints of the operands and the output, then the
    hardware ``feature``, then where the tensors live; then the output and the descriptors. ``plan`` has
    ``tile_m``, ``block_k``, ``block_n``, ``epilogue_n`` and the shared layouts ``a``, ``b``, ``c``. With
    ``partials`` (a shape), the epilogue's descriptor is over a new fp32 workspace of that shape instead of
    ``out``."""
    import torch
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
    M, N, K = check_operands(a, b)
    a_box = [plan.tile_m, plan.block_k]
    b_box = [plan.block_k, plan.block_n]
    c_box = [plan.tile_m, plan.epilogue_n]
    check_tma_tensor(a, "a", [min(plan.tile_m, TMA_BOX_MAX), plan.block_k])
    check_tma_tensor(b, "b", b_box)
    if out is not None:
        check_out(out, M, N, a.dtype, [min(plan.tile_m, TMA_BOX_MAX), plan.epilogue_n])
    require(feature, what)
    for t, name in ((a, "a"), (b, "b")) + (((out, "out"),) if out is not None else ()):
        check_on_gpu(t, name)
    if out is None:
        out = torch.empty((M, N), device=a.device, dtype=a.dtype)
    ws = torch.empty(partials, device=a.device, dtype=torch.float32) if partials else None
    return MatmulCall(plan, out, TensorDescriptor.from_tensor(a, a_box, plan.a),
                      TensorDescriptor.from_tensor(b, b_box, plan.b),
                      TensorDescriptor.from_tensor(out if ws is None else ws, c_box, plan.c), M, N, K, ws)
