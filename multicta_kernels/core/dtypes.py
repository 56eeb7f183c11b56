"""The dtypes the book's kernels take: their Gluon type, their name in a signature, their size and rounding."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Dtype:
    gl: object          # the Gluon dtype
    short: str          # its name in a kernel signature
    bytes: int
    eps: float          # unit roundoff: half a unit in the last place, relative


def _dtypes():
    from triton.experimental.gluon import language as gl
    return {"float32": Dtype(gl.float32, "fp32", 4, 2.0 ** -24), "float16": Dtype(gl.float16, "fp16", 2, 2.0 ** -11),
            "bfloat16": Dtype(gl.bfloat16, "bf16", 2, 2.0 ** -8)}


DTYPES = _dtypes()      # the dtypes the book's kernels take, by torch's name


def dtype_name(dtype) -> str:
    """"float16" for ``torch.float16``, ``gl.float16``, "float16" or "fp16"."""
    for name, d in DTYPES.items():
        if dtype in (name, d.short) or dtype is d.gl or str(dtype) in (f"torch.{name}", name):
            return name
    return str(dtype).replace("torch.", "")
