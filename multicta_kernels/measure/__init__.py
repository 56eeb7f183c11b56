"""Measuring on a GPU: timing, the ceilings of the same run, sweeps, and measured warp timelines.

===============  =============================================================================
``timing``       medians after warm-up (``do_bench`` / ``do_bench_cudagraph``), GB/s, TFLOP/s
``ceilings``     device-to-device copy bandwidth and cuBLAS (Triton's CublasLt binding)
``sweeps``       matmul variants against cuBLAS and torch in interleaved passes; ncu profiles
``traces``       proton inside a kernel: record, read, trim, save and summarise a timeline
``trace_demos``  two small kernels that show what a timeline records
===============  =============================================================================
"""
