"""The bf16 recorders of chapter 1 (tools/record_bf16_diagnosis.py, tools/record_bf16_stalls.py) and the async-copy probe without a GPU: the
variant they time is still one edit of today's kernel, and the stall table is read from ncu's CSV as recorded."""
import csv
import inspect
import io
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import record_bf16_diagnosis as diagnosis  # noqa: E402
import record_bf16_stalls as stalls  # noqa: E402
import record_one_cta_configs as configs  # noqa: E402
import record_one_cta_repeat as repeat  # noqa: E402


def test_the_timed_variant_is_one_edit_of_todays_kernel():
    """A kernel change that removes the edited line would make the recorder time something else, or fail on a GPU."""
    from multicta_kernels import softmax
    src = inspect.getsource(softmax._pipelined_row.fn)
    for name, edits in diagnosis.VARIANTS.items():
        for old in edits:
            assert src.count(old) == 1, f"variant {name!r}: {old!r} is not one line of _pipelined_row"


def _source_csv(rows):
    head = ["Address", "Source", "Warp Stall Sampling (All Samples)", "stall_long_sb"]
    out = io.StringIO()
    w = csv.writer(out, quoting=csv.QUOTE_ALL)
    w.writerow(["Kernel Name", "softmax_pipelined_kernel"])
    w.writerow(head)
    for r in rows:
        w.writerow(r)
    return list(csv.reader(io.StringIO(out.getvalue())))


def test_the_stall_table_keeps_the_most_waited_on_instructions_with_what_precedes_them(monkeypatch):
    rows = [["0x0", "MOV R1, 0x1", "10", "0"], ["0x10", "@P6   LDG.E.128 R92, desc[UR14][R112.64]", "20", "5"],
            ["0x20", "SHF.L.U32 R152, R129, 0x10, RZ", "1,200", "1,000"], ["0x30", "FADD R1, R2, R3", "70", "60"]]
    monkeypatch.setattr(stalls, "_ncu", lambda args, variant: _source_csv(rows))
    got = stalls.source(3)
    assert got["samples"] == 1300 and got["long_scoreboard_samples"] == 1065
    assert got["long_scoreboard_share"] == round(1065 / 1300, 4)
    top = got["top_long_scoreboard"][0]
    assert (top["index"], top["samples"], top["sass"]) == (2, 1000, "SHF.L.U32 R152, R129, 0x10, RZ")
    assert top["previous"] == ["MOV R1, 0x1", "@P6 LDG.E.128 R92, desc[UR14][R112.64]"]
    kernels = {("kernel", "bfloat16"): {"config": "c", **{c: 1.0 for c in stalls.COUNTERS},
                            "stalled_cycles_per_issue": {"long_scoreboard": 1.76}, **got}}
    table = stalls.table(kernels)
    assert all(len(r) == len(stalls.COLUMNS) for r in table)
    assert ["kernel", "bfloat16", "c", "top_long_scoreboard", 2, 1000,
            "MOV R1, 0x1 / @P6 LDG.E.128 R92, desc[UR14][R112.64] / SHF.L.U32 R152, R129, 0x10, RZ"] in table


def test_the_same_configuration_recorder_pairs_each_warp_count():
    """Ours and the upstream design at every one-CTA warp count the upstream design tries, one row a program each,
    then ours at its pick: the comparison separates the code from the pick only if the pairs match."""
    for _, N in configs.SHAPES:
        runs = configs.runs(N)
        ours = [(w, bm) for k, w, bm, _ in runs if k == "ours"]
        theirs = [(w, bm) for k, w, bm, _ in runs if k == "upstream design"]
        assert ours == theirs and ours and all(bm == 1 for _, bm in ours), N
        assert runs[-1][0] == "ours, picked" and len(runs) == 2 * len(ours) + 1, N


@pytest.mark.parametrize("tool", [diagnosis, stalls, configs, repeat])
def test_the_recorders_refuse_a_machine_without_a_cluster_gpu_in_one_line(tool, tmp_path):
    from multicta_kernels.core import hardware
    if hardware.device().capability is not None:
        pytest.skip("a GPU is present")
    with pytest.raises(SystemExit) as exc:
        tool.main(["--out", str(tmp_path)])
    assert "needs thread-block clusters" in str(exc.value) and "\n" not in str(exc.value)
    assert not list(tmp_path.iterdir())


def test_the_timing_recorders_save_what_a_results_record_needs(tmp_path):
    """save_timed, shared by the timing recorders: the copy ceiling of the same run, the timer, the clock, the
    recorder's own method entries, and a file results.load reads back."""
    import record_softmax_phases as phases

    from multicta_kernels import results
    env = {"gpu": "test", "capability": [9, 0], "sms": 132, "driver": None, "cuda": None, "triton": "3.9.0",
           "torch": "2.9", "python": "3.11", "date": "2026-12-03"}
    phases.save_timed(tmp_path / "t.json", "softmax-test", env, {"clock_mhz": 1980.0}, 4186.54, [[1, 2.0]],
                      ["N", "gbps"], command="python3 tools/x.py --out <dir>", checked="against torch")
    r = results.load(str(tmp_path / "t.json"))
    assert r["ceilings"] == {"copy_gbps": 4186.5} and r["benchmark"] == "softmax-test" and r["gpu"] == "test"
    assert r["method"]["timer"].startswith("measure.timing.time_ms") and r["method"]["clock"]["clock_mhz"] == 1980.0
    assert r["method"]["command"] == "python3 tools/x.py --out <dir>" and list(results.records(r)) == [
        {"N": 1, "gbps": 2.0}]


def test_the_async_copy_probe_copies_the_next_row_by_cp_async_in_balanced_slices():
    """tools/record_async_copy_probe.py times what its record says: the next row by cp.async (16 bytes a copy, no
    register loads, no TMA), no spill, and slices that cover N in whole vectors with at most one vector a CTA to spare
    (balanced) or the tile's split."""
    import record_async_copy_probe as probe

    from multicta_kernels import lens
    from multicta_kernels import softmax as sm
    cfg = sm.make_config(200000, 16, 8, 1, "float32")
    assert probe.slice_of(200000, cfg, True) == 12500 and probe.slice_of(200000, cfg, False) == 16384
    bf = sm.make_config(200000, 16, 4, 1, "bfloat16")
    assert probe.slice_of(200000, bf, True) == 12504            # whole 8-value vectors: 16 x 12504 >= 200000
    extra = cfg.exchange_layouts()
    sig = {"x_ptr": "*fp32", "out_ptr": "*fp32", "M": "i32", "n_div": "i32", "x_stride_div": "i32",
           "out_stride_div": "i32", **{k: "constexpr" for k in ("BLOCK_N", "SLICE", "ALIGN", "layout", *extra,
                                                                 "stage_view")}}
    spec = lens.KernelSpec(name="async_copy_probe", fn=probe.probe_kernel, signature=sig,
                           constexprs={"BLOCK_N": cfg.block_n, "SLICE": 12500, "ALIGN": cfg.vec, "layout": cfg.layout,
                                       **extra, "stage_view": cfg.stage_layouts()["stage_view"]},
                           options={"num_warps": 8, "num_ctas": 16}, expect=(), divisible=("x_ptr", "out_ptr"))
    k = lens.compile(spec)
    got = k.census(["cp.async.cg.shared.global", "cp.async.bulk", "ld.global", "st.async", "cp.async.wait_group"])
    # 64 values a thread, 16 bytes a copy: 16 copies for the first row, 16 in the loop for the next
    assert got == {"cp.async.cg.shared.global": 32, "cp.async.bulk": 0, "ld.global": 0, "st.async": 2,
                   "cp.async.wait_group": 2}, got
    assert k.resources()["spill_stores"] == 0


def test_the_async_copy_probe_measures_within_the_staged_kernels_limits():
    """The probe times only slices the staged kernel would stage (at most STAGED_MAX_BYTES, at least
    STAGED_MIN_PER_CTA columns a CTA), with 16 values a thread or more."""
    import record_async_copy_probe as probe

    from multicta_kernels import softmax as sm
    assert probe.fits(sm.make_config(200000, 16, 8, 1, "float32"), 4)          # 64 KiB a CTA
    assert not probe.fits(sm.make_config(100000, 2, 16, 1, "float32"), 4)      # 256 KiB a CTA
    assert not probe.fits(sm.make_config(50000, 16, 16, 1, "float32"), 4)      # 8 values a thread
