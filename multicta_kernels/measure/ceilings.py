"""Ceilings measured in the same run as the kernels they bound: device-to-device copy bandwidth and cuBLAS."""
from __future__ import annotations

from .timing import gbps, tflops, time_ms
from ..core import validate
from ..core.hardware import CUDA, require


def copy_ceiling_gbps(nbytes: int = 1 << 30) -> float:
    """Device-to-device copy bandwidth in GB/s, counting bytes read plus bytes written."""
    validate.count(nbytes, "nbytes", 4, 1 << 36)
    require(CUDA, "copy_ceiling_gbps", instead="read the recorded ceilings in results/")
    import torch
    src = torch.empty(nbytes // 4, device="cuda", dtype=torch.float32).uniform_(-1, 1)
    dst = torch.empty_like(src)
    ms = time_ms(lambda: dst.copy_(src), cudagraph=False, rep=200)
    del src, dst
    return gbps(2 * nbytes, ms)


class Cublas:
    """cuBLAS (cublasLt) through Triton's own binding: ``C = A @ B`` with B given as B^T, row-major."""

    def __init__(self, workspace_bytes: int = 32 << 20):
        import torch
        from triton._C.libtriton import nvidia
        self._workspace = torch.empty(workspace_bytes, device="cuda", dtype=torch.uint8)
        self._lt = nvidia.cublas.CublasLt(self._workspace)

    def matmul(self, a, b_t, c):
        """``c = a @ b_t.T``: a is (M, K), b_t is (N, K), both contiguous; c is (M, N)."""
        self._lt.matmul(a, b_t, c)
        return c


def cublas_tflops(M: int = 8192, N: int = 8192, K: int = 8192, dtype: str = "float16") -> float:
    for name, v in (("M", M), ("N", N), ("K", K)):
        validate.count(v, name, high=1 << 16)
    dtype = validate.dtype(dtype)
    require(CUDA, "cublas_tflops", instead="read the recorded ceilings in results/")
    import torch
    dt = getattr(torch, dtype)
    a = torch.randn(M, K, device="cuda", dtype=dt)
    b_t = torch.randn(N, K, device="cuda", dtype=dt)
    c = torch.empty(M, N, device="cuda", dtype=dt)
    blas = Cublas()
    ms = time_ms(lambda: blas.matmul(a, b_t, c), cudagraph=False, rep=200)
    return tflops(M, N, K, ms)
