#!/usr/bin/env python3
"""Why bf16 trails fp16 in the pipelined softmax: the data or the code? (about four minutes on a Hopper GPU)

    bash .device/run python3 tools/record_bf16_diagnosis.py --out $OUT        # the device machine
    .venv/bin/python tools/record_bf16_diagnosis.py --out results/h200          # a GPU node

fp16 and bf16 rows move the same bytes, yet at 131072 columns and wider the bf16 kernel is slower. At each width
of the half benchmark where the pipelined kernel is picked, four runs, each output checked against torch before it
is timed: the fp16 kernel on fp16 rows, the bf16 kernel on bf16 rows, and each kernel on the other's bits (the same
bytes read as the other type: torch's view). If the bits were the cause (what the memory system moves), a kernel
would take the other's time on the other's bits. Then the same four with one line of the kernel changed, the
exponent's argument ``(x - m) * LOG2E`` written as ``x * LOG2E - m * LOG2E`` (one fma a value instead of a
subtraction and a multiplication), in a process of its own so that Triton compiles the changed kernel. Beside each
262144-wide row: the SASS ptxas makes of that kernel (instructions, registers, spills; sm_90a, Triton's ptxas).
Writes ``softmax_bf16_diagnosis.json``.
"""
import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

SHAPES = [(32768, 65536), (16384, 131072), (8192, 200000), (8192, 262144)]
VARIANTS = {"kernel": {},
            "exp argument as one fma": {"e = gl.exp2((x - m_safe[:, :, None]) * LOG2E)":
                                        "e = gl.exp2(x * LOG2E - (m_safe * LOG2E)[:, :, None])"}}
COLUMNS = ["variant", "kernel_dtype", "bits_of", "M", "N", "config", "time_us", "gbps", "fraction_of_copy",
           "sass_instructions", "registers", "spill_bytes"]


def _use_variant(name: str):
    """Replace the pipelined kernel's row step by the variant's (before anything compiles, in this process)."""
    from multicta_kernels import softmax as sm
    from multicta_kernels.lens.variants import variant
    if not VARIANTS[name]:
        return
    row = variant(sm._pipelined_row, edits=VARIANTS[name])
    row.fn.__globals__.update({k: getattr(sm, k) for k in dir(sm) if k.startswith("_") and not k.startswith("__")})
    sm._pipelined_row = row


def _sass(N: int, dtype: str) -> tuple:
    from multicta_kernels import lens
    from multicta_kernels import softmax as sm
    from multicta_kernels.lens.sass import resources, sass_census
    cfg = sm.pick_config(N, dtype)
    ptx = lens.compile(sm.softmax_pipelined_spec(num_ctas=cfg.num_ctas, N=N, num_warps=cfg.num_warps,
                                                 block_m=cfg.block_m, dtype=dtype)).ptx
    res = resources(ptx, "sm_90a")
    return sum(sass_census(ptx).values()), res["registers"], res["spill_stores"]


def child(name: str, copy_gbps: float) -> list:
    import torch

    from multicta_kernels import softmax as sm
    from multicta_kernels.measure.timing import gbps, log, time_ms
    from multicta_kernels.core.accuracy import assert_softmax_close
    _use_variant(name)
    rows = []
    torch.manual_seed(0)
    for M, N in SHAPES:
        data = {"float16": torch.randn(M, N, device="cuda", dtype=torch.float16),
                "bfloat16": torch.randn(M, N, device="cuda", dtype=torch.bfloat16)}
        for kernel_dtype, bits_of in (("float16", "float16"), ("bfloat16", "bfloat16"), ("bfloat16", "float16"),
                                      ("float16", "bfloat16")):
            cfg = sm.pick_config(N, kernel_dtype)
            if cfg.exchange != "pipelined":
                raise SystemExit(f"pick_config({N}, {kernel_dtype!r}) is not the pipelined kernel: {cfg}")
            x = data[bits_of].view(getattr(torch, kernel_dtype))
            y = torch.full_like(x, float("nan"))
            sm.multicta_softmax(x, y, config=cfg)
            assert_softmax_close(y, x)                         # checked, then timed
            ms = time_ms(lambda: sm.multicta_softmax(x, y, config=cfg))
            rate = gbps(2 * x.numel() * x.element_size(), ms)
            sass = _sass(N, kernel_dtype) if N == 262144 and kernel_dtype == bits_of else (None, None, None)
            rows.append([name, kernel_dtype, bits_of, M, N, f"{cfg.num_ctas} CTAs x {cfg.num_warps} warps",
                         round(ms * 1e3, 1), round(rate, 1), round(rate / copy_gbps, 4), *sass])
            log(f"[bf16 diagnosis] {name}: {kernel_dtype} kernel on {bits_of} bits, {M} x {N}: {rate:.0f} GB/s"
                + (f", {sass[0]} SASS instructions, {sass[1]} registers, {sass[2]} bytes spilled" if sass[0] else ""))
        del data
    return rows


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out")
    ap.add_argument("--child", choices=list(VARIANTS), help=argparse.SUPPRESS)
    ap.add_argument("--copy", type=float, help=argparse.SUPPRESS)
    ap.add_argument("--json", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        Path(a.json).write_text(json.dumps(child(a.child, a.copy)))
        return
    if not a.out:
        ap.error("--out is required")
    from record_softmax_phases import save_timed, start
    from record_timelines import say

    from multicta_kernels.measure.ceilings import copy_ceiling_gbps
    out, env, clock = start("record_bf16_diagnosis", __doc__, ["--out", a.out])
    copy = copy_ceiling_gbps()
    say(f"copy ceiling {copy:.0f} GB/s")
    rows = []
    for name in VARIANTS:
        with tempfile.NamedTemporaryFile(suffix=".json") as f:
            subprocess.run([sys.executable, __file__, "--child", name, "--copy", str(copy), "--json", f.name],
                           check=True)
            rows += json.loads(Path(f.name).read_text())
    save_timed(out / "softmax_bf16_diagnosis.json", "softmax-bf16-diagnosis", env, clock, copy, rows, COLUMNS,
               command="python3 tools/record_bf16_diagnosis.py --out <dir>",
               timer="measure.timing.time_ms (do_bench_cudagraph, median)",
               kernel="softmax_pipelined_kernel at pick_config(N, kernel_dtype); variant 'exp argument as one fma': "
                      "_pipelined_row with " + repr(VARIANTS["exp argument as one fma"]),
               data="torch.randn of the bits_of dtype, seed 0, read as kernel_dtype (torch's view)",
               bytes="2 * M * N * 2 (read x, write out)",
               checked="every output against torch (assert_softmax_close) before it was timed",
               sass="the kernel's SASS at 262144 (lens.sass_census on sm_90a, ptxas -v), where the kernel reads its "
                    "own dtype")


if __name__ == "__main__":
    main()
