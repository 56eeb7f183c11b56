"""Part 0's recorded numbers: the GPU's hierarchy as the driver reports it, with the copy and cuBLAS ceilings."""
from __future__ import annotations

import triton

from ..core.hardware import CUDA, require
from ..measure import ceilings, timing


PROPERTIES = ["name", "multi_processor_count", "max_threads_per_multi_processor", "regs_per_multiprocessor",
              "warp_size", "shared_memory_per_block", "shared_memory_per_block_optin",
              "shared_memory_per_multiprocessor", "L2_cache_size", "total_memory", "clock_rate",
              "memory_clock_rate", "memory_bus_width"]


def device_properties(quick: bool = False, log=print) -> dict:
    """The GPU's hierarchy as the driver reports it, with the copy and cuBLAS ceilings of the same
    run: recorded so the CPU build of Part 0 can show real numbers."""
    import torch
    require(CUDA, "the device benchmark", instead="read the recorded properties in results/ (nothing was written)")
    props = torch.cuda.get_device_properties(0)
    rows = [[k, getattr(props, k)] for k in PROPERTIES if hasattr(props, k)]
    drv = triton.runtime.driver.active.utils.get_device_properties(0)
    rows += [[f"triton_{k}", v] for k, v in sorted(drv.items())]
    for k, v in rows:
        log(f"[device] {k} = {v}")
    copy = ceilings.copy_ceiling_gbps()
    blas = ceilings.cublas_tflops()
    torch_mm = timing.tflops(8192, 8192, 8192, timing.time_ms(
        lambda a=torch.randn(8192, 8192, device="cuda", dtype=torch.float16),
        b=torch.randn(8192, 8192, device="cuda", dtype=torch.float16): a @ b, cudagraph=False, rep=200))
    log(f"[device] copy {copy:.0f} GB/s, cuBLAS fp16 {blas:.0f} TFLOP/s, torch.matmul fp16 {torch_mm:.0f} TFLOP/s")
    return {"method": {"timer": "do_bench", "statistic": "median", "source": "torch.cuda.get_device_properties "
                       "and triton.runtime.driver.active.utils.get_device_properties"},
            "ceilings": {"copy_gbps": round(copy, 1), "cublas_fp16_tflops": {"8192x8192x8192": round(blas, 1)},
                         "torch_matmul_fp16_tflops": {"8192x8192x8192": round(torch_mm, 1)}},
            "columns": ["property", "value"], "rows": rows}
