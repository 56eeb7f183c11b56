"""What ``doctor --record --bench`` adds on a Blackwell GPU: the first runs ever of the CLC matmul's 8192 x 8192
grids and of its instrumented build, each in a child process with a time limit, as the checks run."""
from __future__ import annotations

import os
from pathlib import Path

from . import bench
from ..core.accuracy import assert_matmul_close, poisoned
from ..core.hardware import TCGEN05
from ..measure import traces as tl
from ..results import store
from .selftests import Check


def record_clc_timeline(folder: Path, env: dict, K: int = 512) -> Path:
    """Chapter 5's measured timeline, on the first Blackwell run: the CLC matmul with its scopes under
    proton, 8192 x 8192 x K, checked element by element, two clusters kept."""
    import tempfile

    import torch
    import triton
    from .. import clc_matmul as cm
    a = torch.randn(8192, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, 8192, device="cuda", dtype=torch.float16)
    c = poisoned((8192, 8192), torch.float16)
    num_ctas = 1 << len(cm.CONFIG["cga_layout"])
    owner = tl.placed_partitions(cm.clc_matmul_spec(), ["epilogue", "loader", "mma", "scheduler"],
                                 "sm_100a")
    dev = triton.runtime.driver.active.get_current_device()
    clock = triton.runtime.driver.active.utils.get_device_properties(dev)["sm_clock_rate"] / 1000
    tr = tl.record(lambda: cm.clc_matmul(a, b, out=c, instrument=True), f"clc_matmul_k{K}", folder=tempfile.mkdtemp(),
                   mode=tl.default_mode(cm.TIMELINE_BUFFER), num_ctas=num_ctas, partitions=owner, clock_mhz=clock)
    assert_matmul_close(c, a, b, "the instrumented clc_matmul")
    path = tl.save(tl.trim(tr, clusters=2), folder / f"timeline_clc_matmul_k{K}.json", env,
                   benchmark=f"timeline-clc_matmul_k{K}",
                   method={"kernel": f"clc_matmul_kernel 8192 x 8192 x {K} fp16, CONFIG", "warmup_launches": 1,
                           "record_buffer_bytes": cm.TIMELINE_BUFFER,
                           "clock": {"clock_mhz": clock, "how": "the driver's reported SM clock"}})
    print(f"[doctor] wrote {path}")
    return path


# The benchmarks --record --bench adds on Blackwell: the first runs ever of their 8192 x 8192 grids and of the
# instrumented build, so each runs in a child with a time limit, as the checks do (one phase, compile included).
FOLDER_ENV = "MULTICTA_DOCTOR_FOLDER"


def _record_clc_benchmark():
    folder = Path(os.environ[FOLDER_ENV])
    out = folder / "clc_matmul.json"
    bench.run("clc-matmul", out)
    return f"wrote {out}"


def _record_clc_timeline():
    return f"wrote {record_clc_timeline(Path(os.environ[FOLDER_ENV]), store.environment())}"


RECORDERS = {n: Check(n, "5", TCGEN05, fn, what, phases=False) for n, fn, what in [
    ("clc_matmul_benchmark", _record_clc_benchmark, "python -m multicta_kernels.cli.bench clc-matmul"),
    ("clc_matmul_timeline", _record_clc_timeline, "chapter 5's measured timeline (proton)")]}
RECORD_TIMEOUT = {"clc_matmul_benchmark": 1800.0, "clc_matmul_timeline": 900.0}
