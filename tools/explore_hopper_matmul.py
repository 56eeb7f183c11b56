#!/usr/bin/env python3
"""Chapter 6's configuration knobs at short K on a Hopper GPU, against cuBLAS and torch in the same run
(issue 17: what bounds K = 512), and what cuBLAS runs there.

    bash .device/run python3 tools/explore_hopper_matmul.py --out $OUT/hopper_matmul_explore.json
        times every EXPLORE configuration at 8192 x 8192 x K (K in KS) with cuBLAS and torch.matmul, and
        names the kernel each of the two baselines launches at every shape (torch's profiler);
    bash .device/run ncu --clock-control none --kernel-name regex:'matmul_kernel|gemm|nvjet|sm90|cutlass' \\
        --metrics $(bash .device/run python3 tools/explore_hopper_matmul.py --ncu-metrics) --csv \\
        python3 tools/explore_hopper_matmul.py --launch 512 > ncu.csv
    python3 tools/explore_hopper_matmul.py --record-ncu ncu.csv $OUT/hopper_matmul_ncu_k512.json
        one launch of each PROFILED configuration and of both baselines at 8192 x 8192 x 512, under ncu;
    bash .device/run python3 tools/explore_hopper_matmul.py --diagnose $OUT/hopper_matmul_diagnose.json
        times copies of the kernel with a part taken away (DIAGNOSTICS): where a tile's time goes.
"""
import argparse
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from multicta_kernels import hopper_matmul as hm, lens, results
from multicta_kernels.measure import ceilings, sweeps, timing  # noqa: E402
from multicta_kernels.core.hardware import require_or_exit, WGMMA  # noqa: E402

S4 = dict(stages=4, epilogue_n=64)            # a fourth stage fits only with a sliced epilogue (two 16 KiB buffers)
HINTS = dict(l2_hints=True)
EXPLORE = {
    "default (128x256, 3 stages)": dict(l2_hints=False, tile_width=8),
    "tile_width 4": dict(l2_hints=False, tile_width=4),
    "L2 hints": dict(HINTS, tile_width=8),
    "L2 hints, tile_width 4": dict(HINTS, tile_width=4),
    "L2 hints, 4 stages, epilogue_n 64": dict(HINTS, **S4, tile_width=8),
    "L2 hints, 4 stages, epilogue_n 64, tile_width 4": dict(HINTS, **S4, tile_width=4),
    "2-CTA": dict(num_ctas=2, l2_hints=False, tile_width=8),
    "2-CTA, L2 hints": dict(HINTS, num_ctas=2, tile_width=8),
    "2-CTA, L2 hints, tile_width 4": dict(HINTS, num_ctas=2, tile_width=4),
    "ping-pong 64x256, L2 hints": dict(HINTS, consumers=2, block_m=64, stages=4, tile_width=8),
    "ping-pong 128x128, L2 hints": dict(HINTS, consumers=2, block_m=128, block_n=128, stages=5, tile_width=8),
}
KS = (512, 1024, 2048, 4096)
PROFILED = ("default (128x256, 3 stages)", "tile_width 4", "L2 hints", "L2 hints, tile_width 4",
            "2-CTA, L2 hints, tile_width 4")
# ncu metrics, by base name (the suffix picks the statistic); those this ncu does not know are left out
NCU_METRICS = {
    "gpu__time_duration": ".sum",
    "sm__throughput": ".avg.pct_of_peak_sustained_elapsed",
    "lts__throughput": ".avg.pct_of_peak_sustained_elapsed",
    "lts__t_sector_hit_rate": ".pct",
    "lts__t_bytes": ".sum",
    "dram__throughput": ".avg.pct_of_peak_sustained_elapsed",
    "dram__bytes_read": ".sum",
    "dram__bytes_write": ".sum",
}


# Copies of the kernel with one part taken away, to see what that part costs. Their outputs are wrong by
# design (never checked, never compared with cuBLAS): only their times are recorded, beside the real kernel's.
NEVER = "if row < 0:   # never true: the copy without the epilogue\n                "
DIAGNOSTICS = {
    "no epilogue (the tile is never stored)": {
        "store_tile(r.c_desc, c_smem, acc, row, off_n,": NEVER + "store_tile(r.c_desc, c_smem, acc, row, off_n,"},
    "no loads after the first lap (operands stay in shared memory)": {
        "                r.load_at(s, off_m, off_n, k)":
            "                if it < r.STAGES:\n                    r.load_at(s, off_m, off_n, k)\n"
            "                else:\n                    mbarrier.arrive(r.ready.index(s))"},
}
DIAGNOSTICS["epilogue without its TMA store (no C traffic)"] = {
    "        tma.async_store(c_desc, [off_m, off_n + i * EPI_N], buf, cache_policy=POLICY)":
        "        if off_m < 0:   # never true\n"
        "            tma.async_store(c_desc, [off_m, off_n + i * EPI_N], buf, cache_policy=POLICY)"}
DIAGNOSTICS["epilogue without its shared-memory write (C traffic only)"] = {
    "        buf.store(parts[i])": "        if off_m < 0:   # never true\n            buf.store(parts[i])"}
DIAGNOSTICS["neither (wgmma and barriers only)"] = {**DIAGNOSTICS["no epilogue (the tile is never stored)"],
                                                   **DIAGNOSTICS["no loads after the first lap (operands stay in shared memory)"]}


def kernel_copy(edits: dict, where: Path):
    """hopper_matmul.py with ``edits`` (old text -> new text, each found exactly once), imported from ``where``."""
    src = Path(hm.__file__).read_text().replace("from . import", "from multicta_kernels import").replace(
        "from .", "from multicta_kernels.")
    for old, new in edits.items():
        if src.count(old) != 1:
            raise ValueError(f"edit not found exactly once in hopper_matmul.py: {old!r}")
        src = src.replace(old, new)
    return lens.module_from_source(f"hopper_copy_{abs(hash(tuple(edits.items())))}", src, where)


def diagnose(out_path, ks=(512, 4096)) -> None:
    import tempfile
    import torch
    from multicta_kernels.core.accuracy import assert_matmul_close
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        copies = {"the kernel (default configuration)": hm} | {n: kernel_copy(e, Path(tmp)) for n, e in DIAGNOSTICS.items()}
        for K in ks:
            a = torch.randn(8192, K, device="cuda", dtype=torch.float16)
            b = torch.randn(K, 8192, device="cuda", dtype=torch.float16)
            c = torch.empty(8192, 8192, device="cuda", dtype=torch.float16)
            row = [8192, 8192, K]
            for name, mod in copies.items():
                if mod is hm:                                   # the real kernel must compute C: checked first
                    c.fill_(float("nan"))
                    mod.prepare(a, b, c)()
                    assert_matmul_close(c, a, b, f"{name} K={K}")
                row.append(round(timing.tflops(8192, 8192, K, timing.time_ms(mod.prepare(a, b, c), cudagraph=False,
                                                                           rep=200)), 1))
                timing.log(f"[diagnose] K={K} {name}: {row[-1]} TFLOP/s")
            rows.append(row)
    result = {"benchmark": "hopper-matmul-diagnose", **results.environment(),
              "method": {"timer": "triton.testing.do_bench (L2 flushed before each call; CUDA events)",
                         "statistic": "median", "dtype": "float16", "configuration": hm.CONFIG,
                         "copies": {n: list(e.values()) for n, e in DIAGNOSTICS.items()},
                         "note": "the copies compute wrong outputs by design; only their times mean anything"},
              "ceilings": {}, "columns": ["M", "N", "K"] + [f"{n}_tflops" for n in copies], "rows": rows}
    results.save(result, out_path)


def _prepare(cfg):
    return lambda a, b, c: hm.prepare(a, b, c, **cfg)


def baseline_kernels(shapes) -> dict:
    """The GPU kernels that cuBLAS (the CublasLt binding) and torch.matmul launch at each shape, by name."""
    import torch
    from torch.profiler import ProfilerActivity, profile
    blas = ceilings.Cublas()
    out = {}
    for M, N, K in shapes:
        a = torch.randn(M, K, device="cuda", dtype=torch.float16)
        b = torch.randn(K, N, device="cuda", dtype=torch.float16)
        b_t, c = b.T.contiguous(), torch.empty(M, N, device="cuda", dtype=torch.float16)
        names = {}
        for who, fn in (("cublaslt", lambda: blas.matmul(a, b_t, c)), ("torch", lambda: a @ b)):
            fn()
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                fn()
                torch.cuda.synchronize()
            names[who] = sorted({e.name for e in prof.events() if e.device_type.name == "CUDA"})
        out[f"{M}x{N}x{K}"] = names
    return out


def explore(out_path) -> None:
    variants = {n: _prepare(cfg) for n, cfg in EXPLORE.items()}
    shapes = [(8192, 8192, k) for k in KS]
    columns, rows = sweeps.matmul_sweep(variants, shapes, timing.log, "explore")
    result = {"benchmark": "hopper-matmul-explore", **results.environment(),
              "method": sweeps.matmul_method("float16", EXPLORE, defaults=hm.CONFIG,
                                             launch="prepare(): the timer sees launches only",
                                             baseline_kernels="torch.profiler: the CUDA kernels one call launches"),
              "ceilings": sweeps.cublas_ceiling(rows),
              "baseline_kernels": baseline_kernels(shapes), "columns": columns, "rows": rows}
    results.save(result, out_path)


def launch(K: int) -> None:
    """One launch of each PROFILED configuration, then cuBLAS and torch.matmul, at 8192 x 8192 x K (for ncu)."""
    import torch
    a = torch.randn(8192, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, 8192, device="cuda", dtype=torch.float16)
    c = torch.empty(8192, 8192, device="cuda", dtype=torch.float16)
    for name in PROFILED:
        _prepare(EXPLORE[name])(a, b, c)()
    ceilings.Cublas().matmul(a, b.T.contiguous(), c)
    a @ b
    torch.cuda.synchronize()


def ncu_metrics() -> str:
    known = subprocess.run(["ncu", "--query-metrics", "--chip", "gh100"], capture_output=True, text=True).stdout
    names = {line.split()[0] for line in known.splitlines() if line.strip()}
    return ",".join(base + suffix for base, suffix in NCU_METRICS.items() if base in names)


def record_ncu(csv_path, out_path, env: dict, K: int = 512) -> dict:
    """ncu's CSV of ``--launch K`` in, a result out: one row per launch (PROFILED, then both baselines)."""
    names = list(PROFILED) + ["cuBLAS (CublasLt)", "torch.matmul"]
    kernels = sweeps.ncu_kernels(csv_path, names)
    metrics = sorted({m for k in kernels for m in k if m not in ("kernel", "grid")})
    table = [[n, k["kernel"][:80]] + [k.get(m) for m in metrics] for n, k in zip(names, kernels)]
    result = {"benchmark": "hopper-matmul-ncu", **env,
              "command": "ncu --clock-control none --metrics <NCU_METRICS> --csv "
                         f"python3 tools/explore_hopper_matmul.py --launch {K}",
              "method": {"timer": "ncu gpu__time_duration (profiled, --clock-control none)", "shape": [8192, 8192, K],
                         "dtype": "float16", "launches": "one of each; ncu replays it once per metric pass",
                         "configurations": {n: EXPLORE[n] for n in PROFILED}},
              "ceilings": {}, "columns": ["variant", "kernel"] + metrics, "rows": table}
    results.save(result, out_path)
    return result


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="time EXPLORE at every K, and name the baselines' kernels: a result JSON out")
    ap.add_argument("--launch", type=int, metavar="K", help="one launch of each PROFILED configuration (for ncu)")
    ap.add_argument("--diagnose", metavar="OUT", help="time the kernel's DIAGNOSTICS copies: a result JSON out")
    ap.add_argument("--ncu-metrics", action="store_true", help="print the metric list for ncu --metrics")
    ap.add_argument("--record-ncu", nargs=2, metavar=("CSV", "OUT"), help="ncu's CSV in, a result JSON out")
    args = ap.parse_args(argv)
    if args.ncu_metrics:
        print(ncu_metrics())
        return
    if args.record_ncu:
        record_ncu(*args.record_ncu, results.environment())
        return
    if not (args.out or args.launch or args.diagnose):
        ap.error("give --out, --launch, --diagnose, --ncu-metrics or --record-ncu")
    require_or_exit("explore_hopper_matmul", WGMMA)
    if args.launch:
        launch(args.launch)
    if args.diagnose:
        diagnose(args.diagnose)
    if args.out:
        explore(args.out)


if __name__ == "__main__":
    main()
