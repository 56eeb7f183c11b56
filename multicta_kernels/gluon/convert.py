"""Widening a loaded tile to fp32 inside a kernel."""
from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl


@gluon.jit
def to_fp32(x):
    """``x`` in fp32. A bf16 is the top half of an fp32, so it widens exactly by shifting its bits (all 65536
    patterns: tests/test_softmax_pipelined.py); where a tile and the next one's loads fill the registers (chapter 1's
    pipelined softmax at 128 values a thread) ptxas spilled with ``cvt.f32.bf16`` while the kernel was built (an
    observation, not a test); with the shift it does not (tests/test_softmax_pipelined.py)."""
    if x.dtype == gl.bfloat16:
        y = (x.to(gl.int16, bitcast=True).to(gl.int32) << 16).to(gl.float32, bitcast=True)
    else:
        y = x.to(gl.float32)
    return y
