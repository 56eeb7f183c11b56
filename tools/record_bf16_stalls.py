#!/usr/bin/env python3
"""Where the bf16 pipelined softmax waits: Nsight Compute's warp-stall sampling, fp16 against bf16 at 262144 columns,
for the kernel and for the variant tools/record_bf16_diagnosis.py times (about six minutes on a Hopper GPU with ncu).

    bash .device/run python3 tools/record_bf16_stalls.py --out $OUT        # the device machine
    .venv/bin/python tools/record_bf16_stalls.py --out results/h200          # a GPU node

For each variant (record_bf16_diagnosis.VARIANTS: the kernel, and its exponent as one fma), one process launches the
picked pipelined kernel on 8192 x 262144 rows, twice per dtype (a warm-up, then the profiled launch; the fp16 and bf16
outputs checked against torch first). ncu profiles the second launch of each dtype twice: its raw counters (duration,
instructions executed, the average cycles a warp spends stalled per issued instruction, by reason) and its SASS with
the stall samples of each instruction (``--page source``). Writes ``softmax_bf16_stalls.json``: per variant and dtype,
the counters, the share of samples stalled on a long scoreboard (a result a memory operation has not delivered yet),
and the instructions with the most such samples.
"""
import argparse
import csv
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tools"))

M, N = 8192, 262144
DTYPES = ("float16", "bfloat16")
COUNTERS = ("gpu__time_duration.sum", "smsp__inst_executed.sum", "smsp__issue_active.avg.pct_of_peak_sustained_active",
            "sm__warps_active.avg.pct_of_peak_sustained_active")
STALLS = "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\\.ratio"
TOP = 6


def launch(variant: str) -> None:
    """The profiled process: per dtype a checked warm-up launch, then the launch ncu keeps; ``variant``: one of
    record_bf16_diagnosis.VARIANTS, put in place before anything compiles."""
    import torch

    import record_bf16_diagnosis
    record_bf16_diagnosis._use_variant(variant)

    from multicta_kernels import softmax as sm
    from multicta_kernels.core.accuracy import assert_softmax_close
    for dt in DTYPES:
        x = torch.randn(M, N, device="cuda", dtype=getattr(torch, dt))
        y = torch.full_like(x, float("nan"))
        cfg = sm.pick_config(N, dt)
        if cfg.exchange != "pipelined":
            raise SystemExit(f"pick_config({N}, {dt!r}) is not the pipelined kernel: {cfg}")
        sm.multicta_softmax(x, y, config=cfg)
        assert_softmax_close(y, x)
        y.fill_(float("nan"))
        sm.multicta_softmax(x, y, config=cfg)
        torch.cuda.synchronize()
        del x, y


def _ncu(args: list, variant: str) -> list:
    ncu = shutil.which("ncu") or "/usr/local/cuda/bin/ncu"
    run = subprocess.run([ncu, "--kernel-name", "regex:softmax_pipelined", *args, "--csv", sys.executable, __file__,
                          "--launch", variant], capture_output=True, text=True, timeout=400)
    if run.returncode:
        raise SystemExit(f"ncu failed ({run.returncode}): {run.stderr.strip().splitlines()[-1:]}")
    lines = [ln for ln in run.stdout.splitlines() if ln.startswith('"')]
    return list(csv.reader(io.StringIO("\n".join(lines))))


def _num(v: str) -> float:
    return float(v.replace(",", "") or 0)


def counters(which: int, variant: str = "kernel") -> dict:
    rows = _ncu(["--launch-skip", str(which), "--launch-count", "1", "--metrics", ",".join(COUNTERS) + "," + STALLS,
                 "--page", "raw"], variant)
    head = rows[0]
    data = [r for r in rows[2:] if len(r) == len(head)][0]
    out = {h: _num(v) for h, v in zip(head, data) if h in COUNTERS}
    out["stalled_cycles_per_issue"] = {h.removeprefix("smsp__average_warps_issue_stalled_").removesuffix(
        "_per_issue_active.ratio"): _num(v) for h, v in zip(head, data) if "issue_stalled" in h and _num(v) >= 0.01}
    return out


def source(which: int, variant: str = "kernel") -> dict:
    rows = _ncu(["--launch-skip", str(which), "--launch-count", "1", "--section", "SourceCounters",
                 "--section", "WarpStateStats", "--page", "source", "--print-source", "sass"], variant)
    k = next(i for i, r in enumerate(rows) if r and r[0] == "Address")
    head = rows[k]
    data = [r for r in rows[k + 1:] if len(r) == len(head)]
    src, samples, long_sb = (head.index(c) for c in ("Source", "Warp Stall Sampling (All Samples)", "stall_long_sb"))
    total, waited = sum(_num(r[samples]) for r in data), sum(_num(r[long_sb]) for r in data)
    top = sorted(range(len(data)), key=lambda i: -_num(data[i][long_sb]))[:TOP]
    return {"sass_instructions": len(data), "samples": total, "long_scoreboard_samples": waited,
            "long_scoreboard_share": round(waited / total, 4),
            "top_long_scoreboard": [{"index": i, "sass": " ".join(data[i][src].split()),
                                     "samples": _num(data[i][long_sb]),
                                     "previous": [" ".join(data[j][src].split()) for j in range(max(0, i - 3), i)]}
                                    for i in top]}


COLUMNS = ["variant", "dtype", "config", "kind", "name", "value", "sass"]


def table(kernels: dict) -> list:
    """One row per counter, per stall reason, and per instruction of the top long-scoreboard waits (its SASS, after
    the three instructions before it)."""
    rows = []
    for (v, dt), d in kernels.items():
        rows += [[v, dt, d["config"], "counter", c, d[c], ""] for c in COUNTERS]
        rows += [[v, dt, d["config"], "stalled_cycles_per_issue", r, x, ""]
                 for r, x in d["stalled_cycles_per_issue"].items()]
        rows += [[v, dt, d["config"], "samples", c, d[c], ""] for c in
                 ("sass_instructions", "samples", "long_scoreboard_samples", "long_scoreboard_share")]
        rows += [[v, dt, d["config"], "top_long_scoreboard", t["index"], t["samples"],
                  " / ".join(t["previous"] + [t["sass"]])] for t in d["top_long_scoreboard"]]
    return rows


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out")
    ap.add_argument("--launch", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.launch:
        launch(a.launch)
        return
    if not a.out:
        ap.error("--out is required")
    from record_softmax_phases import start
    from record_timelines import say

    from multicta_kernels import results
    from multicta_kernels import softmax as sm
    out, env, clock = start("record_bf16_stalls", __doc__, ["--out", a.out])
    from record_bf16_diagnosis import VARIANTS
    kernels = {}
    for variant in VARIANTS:
        for k, dt in enumerate(DTYPES):
            which = 2 * k + 1                                 # the second launch of each dtype
            cfg = sm.pick_config(N, dt)
            kernels[variant, dt] = {"config": f"{cfg.num_ctas} CTAs x {cfg.num_warps} warps, block_m {cfg.block_m}",
                                    **counters(which, variant), **source(which, variant)}
            d = kernels[variant, dt]
            say(f"{variant}, {dt}: {d['gpu__time_duration.sum'] / 1e3:.0f} us, {d['smsp__inst_executed.sum']:.0f} warp "
                f"instructions, long scoreboard {d['long_scoreboard_share']:.1%} of samples; most at: "
                f"{d['top_long_scoreboard'][0]['sass']}")
    result = {"benchmark": "ncu-stalls-softmax-bf16", **env,
              "method": {"timer": "ncu gpu__time_duration (profiled, one launch of each dtype, replayed once per "
                                  "metric pass)",
                         "command": "python3 tools/record_bf16_stalls.py --out <dir>",
                         "variants": "record_bf16_diagnosis.VARIANTS: the kernel, and its exp argument as one fma",
                         "tool": "Nsight Compute (ncu) on softmax_pipelined_kernel at pick_config(N, dtype), "
                                 f"{M} x {N}, data torch.randn; each dtype's second launch, profiled twice (--page raw "
                                 "for the counters, --page source --print-source sass for the samples per instruction)",
                         "checked": "each dtype's first launch against torch (assert_softmax_close)",
                         "stalled_cycles_per_issue": "smsp__average_warps_issue_stalled_<reason>_per_issue_active."
                                                     "ratio, reasons of at least 0.01",
                         "long_scoreboard": "stall_long_sb samples: a warp waiting for a register that a global "
                                            "load (or another L1TEX operation) has not filled yet",
                         "clock": clock},
              "ceilings": {}, "columns": COLUMNS, "rows": table(kernels)}
    say(f"wrote {results.save(result, out / 'softmax_bf16_stalls.json')}")


if __name__ == "__main__":
    if "--launch" not in sys.argv:
        os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()
