"""Chapter 5's benchmark: the CLC matmul against cuBLAS and torch.matmul (Blackwell only)."""
from __future__ import annotations

from .. import clc_matmul as cm
from ..core.hardware import TCGEN05, require
from ..measure import sweeps


def benchmark(quick: bool = False, log=print) -> dict:
    """TFLOP/s at M = N = 8192 for K = 512 ... 16384 against cuBLAS (Triton's CublasLt binding)
    and torch.matmul, fp16, for each cga_layout (VARIANTS); on Blackwell only. The timer sees
    ``prepare``'s ``launch()`` (validation and descriptors done once, then Triton's JIT launch), as
    chapter 6's benchmark times ``hopper_matmul.prepare``'s."""
    require(TCGEN05, "the clc-matmul benchmark")
    variants = {name: (lambda a, b, c, cfg=cfg: cm.prepare(a, b, c, **cfg)) for name, cfg in cm.VARIANTS.items()}
    ks = [512, 4096] if quick else [512, 1024, 2048, 4096, 8192, 16384]
    columns, rows = sweeps.matmul_sweep(variants, [(8192, 8192, k) for k in ks], log, "clc-matmul")
    config = {k: (list(v) if isinstance(v, tuple) else v) for k, v in cm.CONFIG.items()}
    return {"method": {"timer": "do_bench", "statistic": f"median; best of {sweeps.SWEEP_PASSES} passes",
                       "passes": sweeps.SWEEP_METHOD, "dtype": "float16", "M": 8192, "N": 8192,
                       "config": config,
                       "launch": "prepare(): validated and descriptors built once; the timer sees Triton's JIT launch",
                       "variants": {n: {k: [list(b) for b in v] for k, v in cfg.items()} for n, cfg in cm.VARIANTS.items()}},
            "ceilings": {"cublas_fp16_tflops": {f"8192x8192x{r[2]}": r[-2] for r in rows}},
            "columns": columns, "rows": rows}
