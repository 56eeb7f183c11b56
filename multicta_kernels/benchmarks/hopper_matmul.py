"""Chapter 6's measurements: the variants and the ablation against cuBLAS and torch.matmul, the measured wgmma
ceiling, layer shapes of real models, bf16; and the L2 traffic of each step through Nsight Compute:

    ncu ... python -m multicta_kernels.benchmarks.hopper_matmul > l2.csv          (see L2_COMMAND)
    python -m multicta_kernels.benchmarks.hopper_matmul --record-l2 l2.csv results/h200/hopper_matmul_l2.json
"""
from __future__ import annotations

import math
import statistics

from triton.experimental.gluon import language as gl

from .. import hopper_matmul as hm, wide_tiles as wt
from ..core import hardware, validate
from ..core.hardware import WGMMA, require, require_or_exit
from ..gluon.operands import check_operands, nvmma_layout
from ..measure import ceilings, sweeps, timing
from ..results import store


def mma_peak_tflops(iters: int = 20000, block_m: int = 128, block_n: int = 256, ctas_per_sm: int = 1) -> float:
    """Measured dense fp16 wgmma rate of the whole GPU: ``ctas_per_sm`` CTAs per SM (default one), each
    ``block_m // 64`` warpgroups issuing m64n{block_n}k16 (block_n a power of two from 16 to 256)."""
    import torch
    validate.one_of(block_m, "block_m", (64, 128))
    validate.one_of(block_n, "block_n", (16, 32, 64, 128, 256))
    validate.count(ctas_per_sm, "ctas_per_sm", high=4)
    validate.count(iters, "iters", high=1 << 24)
    require(WGMMA, "mma_peak_tflops")
    sms = torch.cuda.get_device_properties(0).multi_processor_count * ctas_per_sm
    out = torch.empty(sms, device="cuda", dtype=torch.float32)
    warps = block_m // 16
    args = dict(a_layout=nvmma_layout([block_m, 64], gl.float16, []), b_layout=nvmma_layout([64, block_n], gl.float16, []),
                acc_layout=gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[warps, 1],
                                                     instr_shape=[16, block_n, 16]),
                fill_layout=gl.BlockedLayout([1, 8], [4, 8], [warps, 1], [1, 0]), num_warps=warps)
    ms = timing.time_ms(lambda: hm.mma_peak_kernel[(sms,)](out, iters, **args), cudagraph=False, rep=200)
    if not bool(torch.isfinite(out).all()):
        raise RuntimeError("mma_peak_kernel produced non-finite values")
    return sms * iters * 2 * block_m * block_n * 64 / (ms * 1e-3) / 1e12


def prepared(table: dict, names=None) -> dict:
    """``name -> make(a, b, out)`` for ``sweeps.matmul_sweep``: each of ``names`` (default: all) of ``table``'s
    configurations, prepared with ``hm.prepare`` so that the timer sees launches only."""
    return {n: (lambda a, b, c, cfg=table[n]: hm.prepare(a, b, c, **cfg)) for n in (table if names is None else names)}


def benchmark(quick: bool = False, log=print) -> dict:
    """The chapter's measurements, all in one run on one GPU: (1) TFLOP/s at M = N = 8192, K = 512 ...
    16384 (fp16) for each VARIANTS entry against cuBLAS (CublasLt) and torch.matmul, and the measured
    wgmma ceiling; (2) the ablation; (3) layer shapes of real models; (4) bf16. Set
    MULTICTA_SKIP="name,name" to leave variants out (recorded in the result)."""
    import os
    require(WGMMA, "the hopper-matmul benchmark")
    skip = [n for n in os.environ.get("MULTICTA_SKIP", "").split(",") if n]
    names = [n for n in hm.VARIANTS if n not in skip]
    ks = [512, 4096] if quick else [512, 1024, 2048, 4096, 8192, 16384]
    peak = mma_peak_tflops()
    log(f"[hopper-matmul] wgmma ceiling {peak:.0f} TFLOP/s")
    columns, rows = sweeps.matmul_sweep(prepared(hm.VARIANTS, names), [(8192, 8192, k) for k in ks], log, "hopper-matmul")
    tables = {}
    for key, variants, shapes, dtype in (
            ("ablation", prepared(hm.ABLATION), [(8192, 8192, 512), (8192, 8192, 4096)], "float16"),
            ("models", prepared(hm.VARIANTS, names[:3]), hm.MODEL_SHAPES[:2] if quick else hm.MODEL_SHAPES, "float16"),
            ("bf16", prepared(hm.VARIANTS, names[:3]), [(8192, 8192, k) for k in (512, 1024, 8192)], "bfloat16")):
        c, r = sweeps.matmul_sweep(variants, shapes, log, f"hopper-matmul {key}", dtype)
        tables[key] = {"columns": c, "rows": r}
    return {"method": {"timer": "triton.testing.do_bench (L2 flushed before each call; CUDA events)",
                       "statistic": f"median of each timing; best of {sweeps.SWEEP_PASSES} passes",
                       "passes": sweeps.SWEEP_METHOD, "dtype": "float16 in and out, fp32 accumulation",
                       "launch": "prepare(): validated, compiled and descriptors built once; the timer sees launches",
                       "variants": {n: hm.VARIANTS[n] for n in names}, "skipped": skip, "defaults": hm.CONFIG,
                       "picked by K": {"short_k": hm.SHORT_K, "short_k_config": hm.SHORT_K_CONFIG},
                       "ablation": hm.ABLATION},
            "ceilings": {"wgmma_fp16_tflops": round(peak, 1),
                         "cublas_fp16_tflops": {f"{r[0]}x{r[1]}x{r[2]}": r[-2] for r in rows}},
            "columns": columns, "rows": rows, "tables": tables}


# Shapes outside the chapter's own sweep (M = N = 8192, K = 512 ... 16384) and layer shapes (MODEL_SHAPES): squares
# from 1K to 16K, short and odd K at 8192 x 8192, layers of other models at 4096 tokens (Llama-2-7B's MLP 11008,
# Qwen2-7B's hidden 3584 and MLP 18944, Llama-3-8B's fused gate and up projection 28672), and decode-sized
# batches (M = 128 and 512 tokens) of Llama-3-8B's layers.
HELD_OUT_SHAPES = ([(n, n, n) for n in (1024, 2048, 4096, 16384)]
                   + [(8192, 8192, k) for k in (256, 768, 3072)]
                   + [(4096, 11008, 4096), (4096, 4096, 11008), (4096, 18944, 3584), (4096, 3584, 18944),
                      (4096, 28672, 4096), (512, 6144, 4096), (128, 14336, 4096), (128, 4096, 14336)])
# The shapes of the first two runs chose pick_config's rule by shape (PINGPONG_GAIN): HELD_OUT_SHAPES and
# CHOSE_SHAPES. FRESH_SHAPES played no part in it: a check of the rule, on both sides of its threshold (a modest
# one: at most of them the two configurations balance alike, and the rule keeps the default).
CHOSE_SHAPES = [(256, 8192, 8192), (1024, 2048, 8192), (384, 5120, 5120), (1536, 1536, 1536), (3072, 3072, 3072),
                (768, 8192, 4096)]
FRESH_SHAPES = [(2560, 2560, 2560), (640, 8192, 8192), (3584, 3584, 4096), (2048, 5120, 4096), (6144, 6144, 2048),
                (1024, 16384, 2048)]
# Added after the split-K rule (SPLIT_K_SAVED) was set from 128 x 4096 x 14336 and 1024^3 (tools/explore_split_k.py):
# two shapes it splits (Llama-3-70B's MLP down projection at 128 tokens: split_k 2; 512 x 512 x 16384: 8) and two
# just outside it (a split would save 7168 and 2048 of K).
FRESH_SHAPES += [(128, 8192, 28672), (512, 512, 16384), (256, 4096, 14336), (1024, 1024, 4096)]
# The wrapper's own choice (no options: pick_config), and the other configurations a better pick could take.
SHAPE_VARIANTS = {"picked": {}, "1-CTA": hm.VARIANTS["1-CTA"], "2-CTA": hm.VARIANTS["2-CTA"],
                  "ping-pong 128x128, L2 hints": hm.VARIANTS["ping-pong 128x128, L2 hints"]}


def pick_extra(M: int, N: int, K: int, sms: int) -> int | None:
    """Wide tiles' second accumulator in place of hopper_matmul's pick, or None for the pick: ``wt.best_extra``,
    asked only where the pick is the default kernel (not the ping-pong, not split-K: the rounds model was not
    fitted to them)."""
    extra = wt.best_extra(M, N, K, sms)                # validates
    return None if hm.pick_config(K, M, N, sms) else extra


def margin_gap(sms: int, m_max: int = 8192, n_max: int = 16384, ks=(1024, 2048, 4096, 8192)) -> tuple:
    """(below, above): the largest predicted share (``wt.best_share``) at most ``wt.WIDE_GAIN``, and the smallest
    above it, over the shapes where :func:`pick_extra` asks the model: every M and N a multiple of 128 up to
    ``m_max`` x ``n_max``, K in ``ks``, where the pick is the default kernel. Any margin from ``below`` up to (not
    including) ``above`` takes the same widths at all of them."""
    validate.count(sms, "sms", high=1 << 20)
    validate.count(m_max, "m_max", high=1 << 20)
    validate.count(n_max, "n_max", high=1 << 20)
    below, above = 0.0, math.inf
    for K in ks:
        validate.count(K, "K", high=1 << 31)
        for M in range(128, m_max + 1, 128):
            for N in range(128, n_max + 1, 128):
                if hm.pick_config(K, M, N, sms):
                    continue
                share, _ = wt.best_share(M, N, K, sms)
                if share <= wt.WIDE_GAIN:
                    below = max(below, share)
                else:
                    above = min(above, share)
    return below, above


def prepare_picked(a, b, out=None):
    """hopper_matmul's pick, or wide tiles where :func:`pick_extra` takes them; ``launch.extra`` says which
    (None: the pick)."""
    M, N, K = check_operands(a, b)
    extra = pick_extra(M, N, K, hardware.device().sms)
    launch = hm.prepare(a, b, out) if extra is None else wt.prepare(a, b, out, extra=extra)
    launch.extra = extra
    return launch


# Tall tiles (wide_tiles.tall_matmul), a rule set down after results/h100/hopper_matmul_tall_tiles.json and tested
# on shapes no run had measured (tools/validate_tall_pick.py). The rounds model of every kernel the rule can run, each
# K step at the tensor cores' rate for its tile, 2 * BM * BN * 64 / 4096 SM cycles (768 for 192 x 128, 512 for the
# ping-pong's 128 x 128, the default's traced 1024), the wide tiles' at their traced STEP_CYCLES. Tall tiles where
# their cycles are at most TALL_GAIN of those of the kernel prepare_picked runs. The margin is wider than WIDE_GAIN:
# at one round the model gave tall tiles 0.88 of 128 x 144's time at 1536^3, where they took 1.005x (the record).
TALL_GAIN = 0.90
TALL_STEP_CYCLES = 2 * wt.TALL_GROUPS * wt.TALL_GROUP_M * wt.TALL_N * wt.BLOCK_K // 4096


def _rounds(tiles: int, sms: int, K: int, step: int) -> int:
    return math.ceil(tiles / sms) * math.ceil(K / wt.BLOCK_K) * step


def tall_share(M: int, N: int, K: int, sms: int) -> float | None:
    """Tall tiles' rounds cycles as a share of those of the kernel :func:`prepare_picked` runs (the default kernel,
    wide tiles or the ping-pong); None where it runs split-K or a K of at most hm.SHORT_K (the model was not
    fitted to them)."""
    cfg = hm.pick_config(K, M, N, sms)                 # validates
    tall = _rounds(wt.tall_tiles(M, N), sms, K, TALL_STEP_CYCLES)
    if not cfg:
        extra = pick_extra(M, N, K, sms)
        return tall / wt.rounds_cycles(M, N, K, sms, extra)
    if K <= hm.SHORT_K or cfg.get("split_k", 1) > 1:
        return None
    bm, bn = cfg["block_m"], cfg["block_n"]
    return tall / _rounds(math.ceil(M / bm) * math.ceil(N / bn), sms, K, 2 * bm * bn * wt.BLOCK_K // 4096)


def pick_tall(M: int, N: int, K: int, sms: int) -> bool:
    """Whether the rule takes tall tiles: :func:`tall_share` at most TALL_GAIN."""
    share = tall_share(M, N, K, sms)
    return share is not None and share <= TALL_GAIN


def pick_label(cfg: dict) -> str:
    """How a record names what ``pick_config`` chose."""
    if cfg.get("split_k", 1) > 1:
        return f"split-K {cfg['split_k']} (ping-pong 128x128)"
    return "ping-pong 128x128, L2 hints" if cfg else "default (128x256)"


def shapes_benchmark(quick: bool = False, log=print) -> dict:
    """``hopper_matmul(a, b)`` as a user calls it (no options: ``pick_config``) at HELD_OUT_SHAPES, fp16 and bf16,
    against cuBLAS and torch.matmul in the same run, with the other SHAPE_VARIANTS beside it (what a pick by
    shape could reach). Every output is checked against cuBLAS's before anything is timed (``matmul_sweep``)."""
    require(WGMMA, "the hopper-matmul-shapes benchmark")
    shapes = [(1024, 1024, 1024), (2048, 2048, 2048), (128, 14336, 4096)] if quick else HELD_OUT_SHAPES + CHOSE_SHAPES + FRESH_SHAPES
    sms = hardware.device().sms
    columns, rows = None, []
    for dtype in ("float16", "bfloat16"):
        c, r = sweeps.matmul_sweep(prepared(SHAPE_VARIANTS), shapes, log,
                                   "hopper-matmul-shapes", dtype)
        columns = c + ["dtype", "picked_vs_best_baseline", "best_ours_vs_best_baseline", "pick", "fresh"]
        for row in r:
            d = dict(zip(c, row))
            base = max(d[b] for b in hm.BASELINES)
            ours = max(d[f"{n}_tflops"] for n in SHAPE_VARIANTS)
            rows.append(row + [dtype, round(d["picked_tflops"] / base, 4), round(ours / base, 4),
                               pick_label(hm.pick_config(d["K"], d["M"], d["N"], sms)),
                               (d["M"], d["N"], d["K"]) in FRESH_SHAPES])
    ratios = [dict(zip(columns, row))["picked_vs_best_baseline"] for row in rows]
    geo = statistics.geometric_mean(ratios)
    log(f"[hopper-matmul-shapes] picked / better baseline: geometric mean {geo:.3f}, min {min(ratios):.3f}")
    return {"method": {"timer": "triton.testing.do_bench (L2 flushed before each call; CUDA events)",
                       "statistic": f"median of each timing; best of {sweeps.SWEEP_PASSES} passes",
                       "passes": sweeps.SWEEP_METHOD, "dtype": "float16 and bfloat16 in and out, fp32 accumulation",
                       "launch": "prepare(): validated, compiled and descriptors built once; the timer sees launches",
                       "variants": SHAPE_VARIANTS, "pick": {"short_k": hm.SHORT_K, "short_k_config": hm.SHORT_K_CONFIG,
                                                            "pingpong_gain": hm.PINGPONG_GAIN, "sms": sms,
                                                            "split_k_saved": hm.SPLIT_K_SAVED,
                                                            "split_k_config": hm.SPLIT_K_CONFIG},
                       "fresh": "shapes that played no part in choosing the pick's rules by shape (FRESH_SHAPES); "
                                "the others' first runs chose them",
                       "ratio": "ours / max(cuBLAS, torch.matmul), both measured in the same pass"},
            "ceilings": {"picked_vs_best_baseline_geomean": round(geo, 4),
                         "picked_vs_best_baseline_min": min(ratios)},
            "columns": columns, "rows": rows}


# ------------------------------------------------------------------------- L2 bytes, through ncu

L2_METRICS = "lts__t_bytes.sum,lts__t_sectors_srcunit_tex_op_read.sum,dram__bytes_read.sum,gpu__time_duration.sum"
L2_COMMAND = ("ncu --clock-control none --kernel-name regex:'matmul_kernel|gemm|nvjet|sm90' "
              f"--metrics {L2_METRICS} --csv python -m multicta_kernels.benchmarks.hopper_matmul > l2.csv")


L2_LAUNCHES = {**hm.ABLATION, "warp specialised 1-CTA": hm.VARIANTS["1-CTA"], "warp specialised 4-CTA": hm.VARIANTS["4-CTA"]}


def profile_launches(M: int = 8192, N: int = 8192, K: int = 4096) -> None:
    """One launch of each ablation step and variant, then cuBLAS: what ``L2_COMMAND`` profiles."""
    import torch
    for name, v in (("M", M), ("N", N), ("K", K)):
        validate.count(v, name, 8, 1 << 16)
    require(WGMMA, "profile_launches")
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    c = torch.empty(M, N, device="cuda", dtype=torch.float16)
    for cfg in L2_LAUNCHES.values():
        hm.prepare(a, b, c, **cfg)()
    ceilings.Cublas().matmul(a, b.T.contiguous(), c)
    torch.cuda.synchronize()


def record_l2(csv_path, out, env: dict) -> dict:
    """Turn ncu's CSV (from ``L2_COMMAND``) into a result: one row per profiled kernel, in launch order."""
    names = list(L2_LAUNCHES) + ["cuBLAS"]
    kernels = sweeps.ncu_kernels(csv_path, names)
    table = [[n, k["kernel"][:60], k["grid"], round(k["gpu__time_duration.sum"] / 1e3, 1),
              round(k["lts__t_bytes.sum"] / 1e9, 3), round(k["lts__t_sectors_srcunit_tex_op_read.sum"] * 32 / 1e9, 3),
              round(k["dram__bytes_read.sum"] / 1e9, 3)] for n, k in zip(names, kernels)]
    result = {"benchmark": "hopper-matmul-l2", **env, "command": L2_COMMAND,
              "method": {"timer": "ncu gpu__time_duration (profiled, --clock-control none)", "shape": [8192, 8192, 4096],
                         "dtype": "float16", "launches": "one of each; ncu replays it once per metric pass"},
              "ceilings": {}, "columns": ["variant", "kernel", "grid", "time_us", "l2_bytes_gb", "l2_reads_from_sms_gb",
                                          "dram_read_gb"], "rows": table}
    store.save(result, out)
    return result


def main(argv=None) -> None:
    """``python -m multicta_kernels.benchmarks.hopper_matmul``: the launches ``L2_COMMAND`` profiles; with
    ``--record-l2 CSV OUT``, turn ncu's CSV into the recorded result (run it on the GPU node)."""
    import argparse
    ap = argparse.ArgumentParser(prog="python -m multicta_kernels.benchmarks.hopper_matmul", description=main.__doc__)
    ap.add_argument("--record-l2", nargs=2, metavar=("CSV", "OUT"), help="ncu's CSV in, a result JSON out")
    args = ap.parse_args(argv)
    if args.record_l2:
        record_l2(args.record_l2[0], args.record_l2[1], store.environment())
    else:
        require_or_exit("python -m multicta_kernels.benchmarks.hopper_matmul", WGMMA)
        profile_launches()


if __name__ == "__main__":
    main()
