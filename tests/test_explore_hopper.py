"""tools/explore_hopper_matmul.py on a CPU: its kernel copies still apply to the kernel and compile, and its
ncu CSV reader turns a profile into a result with one row per launch, in launch order."""
import dataclasses
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import explore_hopper_matmul as ex  # noqa: E402

from multicta_kernels import hopper_matmul as hm, lens
from multicta_kernels.core import dtypes  # noqa: E402


@pytest.mark.parametrize("name", list(ex.DIAGNOSTICS))
def test_every_diagnostic_copy_applies_and_compiles(name, tmp_path):
    mod = ex.kernel_copy(ex.DIAGNOSTICS[name], tmp_path)
    spec = dataclasses.replace(hm.hopper_matmul_spec(), fn=mod.hopper_matmul_kernel)
    copy, real = lens.compile(spec, "sm_90a").ptx, lens.compile(hm.hopper_matmul_spec(), "sm_90a").ptx
    assert copy != real                                  # the edit changed the compiled kernel
    assert lens.census(copy).get("wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16")   # and it still multiplies


def test_an_edit_that_does_not_apply_is_refused(tmp_path):
    with pytest.raises(ValueError, match="not found exactly once"):
        ex.kernel_copy({"no such line in the kernel": ""}, tmp_path)


def test_every_profiled_and_explored_configuration_is_valid():
    assert set(ex.PROFILED) <= set(ex.EXPLORE)
    for cfg in ex.EXPLORE.values():
        hm.plan(8192, 8192, 512, dtypes.DTYPES["float16"].gl, **{**hm.CONFIG, **cfg})


def test_record_ncu_turns_a_profile_into_one_row_per_launch(tmp_path):
    """The recorded K = 512 profile (results/h200/hopper_matmul_ncu_k512.json) is rebuilt by record_ncu, through
    the same CSV reader as the L2 table (bench.ncu_kernels)."""
    import csv
    from multicta_kernels import results
    names = list(ex.PROFILED) + ["cuBLAS (CublasLt)", "torch.matmul"]
    path = tmp_path / "ncu.csv"
    with open(path, "w", newline="") as f:
        f.write("==PROF== Connected to process\n")
        w = csv.writer(f, quoting=csv.QUOTE_ALL)
        w.writerow(["ID", "Kernel Name", "Grid Size", "Metric Name", "Metric Unit", "Metric Value"])
        for i, _ in enumerate(names):
            for metric, value in (("gpu__time_duration.sum", f"{110000 + i:,}"), ("lts__t_sector_hit_rate.pct", "91.5")):
                w.writerow([i, f"kernel_{i}", "(132, 1, 1)", metric, "", value])
    env = {"gpu": "NVIDIA H200", "date": "2026-11-30", "triton": "3.9.0"}
    out = ex.record_ncu(path, tmp_path / "ncu.json", env)
    assert out["columns"] == ["variant", "kernel", "gpu__time_duration.sum", "lts__t_sector_hit_rate.pct"]
    assert [r[0] for r in out["rows"]] == names and out["rows"][3][2:] == [110003.0, 91.5]
    assert results.load(tmp_path / "ncu.json")["benchmark"] == "hopper-matmul-ncu"
    path.write_text(path.read_text().rsplit("\n", 3)[0] + "\n")              # a launch missing: refused
    with pytest.raises(ValueError, match="expected 7 profiled kernels"):
        ex.record_ncu(path, tmp_path / "ncu2.json", env)


def test_the_split_k_exploration_plans_every_shape_and_is_its_record():
    """tools/explore_split_k.py: every configuration plans at every shape (each split divides the K steps), it refuses
    without a Hopper GPU in one line, and results/h200/hopper_matmul_split_k.json holds its variants and shapes, each
    split's launches timed alone, and the same configurations as SPLIT_K_CONFIG but its L2 hints."""
    import json
    import subprocess

    import explore_split_k as sk
    from multicta_kernels import results
    from multicta_kernels.core import hardware
    for M, N, K in sk.SHAPES:
        for cfg in sk.EXPLORE.values():
            hm.plan(M, N, K, dtypes.DTYPES["float16"].gl, **cfg)
    rec = results.load("h200/hopper_matmul_split_k.json")
    assert rec["method"]["variants"] == {sk.RECORDED.get(k, k): v for k, v in sk.EXPLORE.items()}
    assert [tuple(r[:3]) for r in rec["rows"]] == sk.SHAPES
    parts = rec["tables"]["parts"]
    assert parts["columns"] == sk.PARTS_COLUMNS and rec["tables"]["parts_configs"]["rows"] == [
        [n, json.dumps(c)] for n, c in sk.PARTS.items()]
    assert {(r["M"], r["N"], r["K"], r["variant"]) for r in results.records(parts)} == {
        (*shape, n) for shape in sk.PARTS_SHAPES for n in sk.PARTS}
    assert "does nothing reads" in rec["method"]["parts"]
    for s in (2, 4, 8):
        # SPLIT_K_CONFIG as it was then: the L2 hints were dropped later (explore_small_tiles' split table)
        assert {**hm.CONFIG, **sk.EXPLORE[f"ping-pong, split_k {s}"]} == {**hm.CONFIG, **hm.SPLIT_K_CONFIG, "split_k": s,
                                                                          "l2_hints": True}
    if not hardware.has(hardware.WGMMA):
        out = subprocess.run([sys.executable, str(ROOT / "tools" / "explore_split_k.py"), "--out", "/dev/null"],
                             capture_output=True, text=True)
        assert out.returncode != 0 and len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_the_small_tile_exploration_plans_every_shape_and_refuses_without_a_gpu():
    """tools/explore_small_tiles.py: every configuration plans at every one of its shapes, and without a Hopper GPU it
    refuses in one line, writing nothing."""
    import subprocess

    import explore_small_tiles as st
    from multicta_kernels.core import hardware
    for explore, shapes in ((st.EXPLORE, st.SHAPES), (st.SPLIT, st.SPLIT_SHAPES)):
        for M, N, K in shapes:
            for cfg in explore.values():
                hm.plan(M, N, K, dtypes.DTYPES["float16"].gl, **cfg)
    assert st.SPLIT["split_k 4, no L2 hints"] == {**hm.SPLIT_K_CONFIG, "split_k": 4}     # the pick now
    from multicta_kernels import results
    rec = results.load("h100/hopper_matmul_small_tiles.json")      # its record: the tool's tables, as run
    assert rec["method"]["variants"] == {st.RECORDED.get(k, k): v for k, v in st.EXPLORE.items()}
    assert rec["method"]["split_variants"] == st.SPLIT
    assert [tuple(r[:3]) for r in rec["rows"]] == st.SHAPES
    assert [tuple(r[:3]) for r in rec["tables"]["split_l2_hints"]["rows"]] == st.SPLIT_SHAPES
    (M, N, K), = st.SPLIT_SHAPES      # the unsplit 64 x 64 tiles are as many work units as split_k 4's
    small, split = st.SPLIT["ping-pong 64x64, no split"], st.SPLIT["split_k 4, L2 hints"]
    assert (M // small["block_m"]) * (N // small["block_n"]) == (M // 128) * (N // 128) * split["split_k"] == 128
    if not hardware.has(hardware.WGMMA):
        out = subprocess.run([sys.executable, str(ROOT / "tools" / "explore_small_tiles.py"), "--out", "/dev/null"],
                             capture_output=True, text=True)
        assert out.returncode != 0 and len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_no_exploration_calls_the_pick_the_default():
    """``hopper_matmul`` with no options is the pick (``pick_config``), not the default 128 x 256: a variant named
    "default" must give options (two records were written with the pick so named: each tool's RECORDED says so)."""
    import importlib
    for path in sorted((ROOT / "tools").glob("explore_*.py")):
        mod = importlib.import_module(path.stem)
        for table in (getattr(mod, "EXPLORE", {}), getattr(mod, "SPLIT", {})):
            for name, cfg in table.items():
                assert not (name.startswith("default") and not cfg), f"{path.name}: {name!r} is the pick"


def test_the_stream_k_tools_plan_every_shape_and_are_their_records():
    """tools/explore_stream_k.py and tools/diagnose_stream_k.py: every configuration plans at every shape, each
    refuses without a Hopper GPU in one line, and their records hold their variants (as RECORDED says for the column
    named before the default had options) and shapes."""
    import subprocess

    import diagnose_stream_k as dg
    import explore_stream_k as ex
    from multicta_kernels import results
    from multicta_kernels.core import hardware
    for M, N, K in ex.SHAPES:
        for cfg in ex.EXPLORE.values():
            hm.plan(M, N, K, dtypes.DTYPES["float16"].gl, **cfg)
    rec = results.load("h100/hopper_matmul_stream_k.json")
    assert rec["method"]["variants"] == dict(ex.RECORDED.get(k, (k, v)) for k, v in ex.EXPLORE.items())
    assert [tuple(r[:3]) for r in rec["rows"]] == ex.SHAPES
    diag = results.load("h200/hopper_matmul_stream_k_diagnosis.json")
    assert sorted({tuple(r[:3]) for r in diag["rows"]}) == sorted(tuple(c[:3]) for c in dg.CASES)
    assert {(r[0], r[4]) for r in diag["rows"] if r[3] == "stream-K" and r[0] != 1536} >= {(1024, 32), (4096, 128)}
    if not hardware.has(hardware.WGMMA):
        for tool in ("explore_stream_k.py", "diagnose_stream_k.py"):
            out = subprocess.run([sys.executable, str(ROOT / "tools" / tool), "--out", "/dev/null"],
                                 capture_output=True, text=True)
            assert out.returncode != 0 and len(out.stderr.strip().splitlines()) == 1, (tool, out.stderr)


def test_the_fixed_cost_diagnosis_fits_lines_and_splits_a_timeline_into_phases():
    """tools/diagnose_fixed_cost.py: its line fit recovers a fixed cost and a rate from points on a line (the one-step
    point left out), its phase split reads a synthetic two-CTA timeline as built, every held configuration plans at
    every depth it sweeps, and without a Hopper GPU it refuses in one line."""
    import subprocess

    import diagnose_fixed_cost as fc
    from multicta_kernels.core import hardware
    from multicta_kernels.measure import traces as tl
    ks = [64, 256, 512, 1024, 2048]
    t0, per = fc.fit(ks, [99.0] + [5.0 + 3.0 * k / 1024 for k in ks[1:]])     # K = 64 is off the line, and ignored
    assert (round(t0, 6), round(per, 6)) == (5.0, 3.0)
    cols = tl.COLUMNS
    rec = lambda cta, scope, s, e, part="consumer", w=0: dict(zip(cols, (0, cta, cta, cta, w, w, part, 0,  # noqa
                                                                         scope, "scope", s, e)))
    rows = []
    for cta, shift in ((0, 0.0), (1, 100.0)):
        rows += [rec(cta, "load", shift + 10, shift + 20, "producer", 4),
                 rec(cta, "wait_ready", shift + 15, shift + 400),
                 rec(cta, "mma", shift + 400, shift + 450), rec(cta, "mma", shift + 900, shift + 950)]
        rows += [rec(cta, "epilogue", shift + 960, shift + 1300 - 10 * w, w=w) for w in range(4)]  # one per warp
    tr = tl.Trace([[r[c] for c in cols] for r in rows], meta={"clock_mhz": 2000.0})
    ph = fc.phases(tr, k_steps=2)
    assert ph["ctas"] == 2 and ph["launch_span"] == 1390.0 and ph["step_cycles"] == 1000.0   # 500 ns at 2 GHz
    with pytest.raises(ValueError, match="lost records: warp 0 of CTA 0 has 2 MMA scopes, not a multiple of 3"):
        fc.phases(tr, k_steps=3)                                     # a truncated trace is refused
    assert ph["fill"] == {"median": 390.0, "min": 390.0, "max": 390.0}
    assert ph["main_loop"]["median"] == 550.0 and ph["epilogue"]["median"] == 340.0
    assert ph["after_last_mma"]["median"] == 350.0 and ph["start"] == {"median": 60.0, "min": 10.0, "max": 110.0}
    for M, N, K_ref in fc.SHAPES:
        cfg = hm.pick_config(K_ref, M, N, 132) or dict(hm.CONFIG)
        for K in fc.KS:
            hm.plan(M, N, K, dtypes.DTYPES["float16"].gl, **cfg)
    for M, N, K in ((1536, 1536, 1536), (1024, 1024, 1024)):          # the traced launches take instrument=True
        hm.plan(M, N, K, dtypes.DTYPES["float16"].gl, **fc.traced_config(M, N, K, 132), instrument=True)
        spec = hm.hopper_matmul_spec(**fc.traced_config(M, N, K, 132), instrument=True)
        assert "st.global" in tl.instrumented(spec, "sm_90a", mode=fc.BUFFERS[-1][1]()).ptx   # the fallback compiles
    from multicta_kernels import results
    rec = results.load("h100/hopper_matmul_fixed_cost.json")           # the records hold the tool's plan
    assert [tuple(r[:3]) for r in rec["rows"]] == [(M, N, K) for M, N, _ in fc.SHAPES for K in fc.KS]
    assert [tuple(f[:3]) for f in rec["fits"]] == fc.SHAPES
    parts = results.load("h100/hopper_matmul_ablated_parts.json")
    assert sorted({tuple(r[:3]) for r in parts["rows"]}) == sorted(fc.ABLATED)
    assert {r[3] for r in parts["rows"] if r[4]} >= {"picked", "cuBLAS"}, "the real kernels are in and checked"
    ph = results.load("h100/hopper_matmul_phases.json")
    assert [tuple(r[:3]) for r in ph["rows"]] == [(1536, 1536, 1536), (1024, 1024, 1024)]
    assert all(r[4]["step_cycles"] and r[4]["buffer"] in [b for b, _ in fc.BUFFERS] for r in ph["rows"])
    if not hardware.has(hardware.WGMMA):
        out = subprocess.run([sys.executable, str(ROOT / "tools" / "diagnose_fixed_cost.py"), "--out", "/tmp/fc"],
                             capture_output=True, text=True)
        assert out.returncode != 0 and len(out.stderr.strip().splitlines()) == 1, out.stderr
