"""The doctor, on the CPU: its runner reports PASS, FAIL, HANG and CRASH from child processes, and
the book's "ran on ..." labels are generated from recorded results, never typed."""
import json

import pytest

from multicta_kernels import results
from multicta_kernels.cli import doctor, recorders, selftests
from multicta_kernels.results import labels
from multicta_kernels.core import hardware
from multicta_kernels.core.hardware import CLUSTERS, TCGEN05, WGMMA


def test_runner_survives_fail_hang_and_crash():
    """A hang is killed after its time limit and the checks after it still run, in a fresh child; each
    report names the phase it happened in (a wrong answer and a hang: the run phase)."""
    d = selftests.DEMO
    lines = []
    out = doctor.run_checks([d["pass"], d["fail"], d["hang"], d["crash"], d["pass"]], timeout=8, log=lines.append)
    assert [o.status for o in out] == ["PASS", "FAIL", "HANG", "CRASH", "PASS"]
    assert out[1].detail == "element [3, 4] differs"                  # the run phase: the compile phase compared nothing
    assert out[2].detail.startswith("run phase: no answer within 8 s") and "killed" in out[2].detail
    assert 7 < out[2].seconds < 20
    assert out[3].detail.startswith("run phase: exit status") and "about to abort" in out[3].detail
    assert len(lines) == 5 and all(ln.startswith("[doctor] chdemo") for ln in lines)


def test_a_sticky_error_is_reported_once():
    """After a failure that is not a wrong answer (here a demo that leaves its process unusable, as a sticky
    CUDA error does) the next checks run in a fresh child and pass; a wrong answer keeps the child."""
    d = selftests.DEMO
    out = doctor.run_checks([d["sticky"], d["pass"], d["fail"], d["pass"]], timeout=20, log=lambda _: None)
    assert [o.status for o in out] == ["FAIL", "PASS", "FAIL", "PASS"], [o.detail for o in out]
    assert out[0].detail == "RuntimeError: CUDA error: an illegal instruction was encountered (demo)"


def test_compile_time_is_not_hang_time(monkeypatch):
    """A check whose compile phase takes longer than the run limit still passes (the clock starts after its
    kernels compiled, and the report says how long they took); a compile phase over its own limit is SLOW,
    named as such, and the checks after it still run."""
    d = selftests.DEMO
    monkeypatch.setenv(selftests.DEMO_COMPILE_ENV, "4")
    (slow,) = doctor.run_checks([d["slow-compile"]], timeout=2, compile_timeout=30, log=lambda _: None)
    assert slow.status == "PASS" and slow.compile_seconds >= 3.9 and slow.seconds < 2
    assert "s compile" in doctor._line(slow)
    monkeypatch.setenv(selftests.DEMO_COMPILE_ENV, "600")
    out = doctor.run_checks([d["slow-compile"], d["pass"]], timeout=2, compile_timeout=3, log=lambda _: None)
    assert [o.status for o in out] == ["SLOW", "PASS"]
    assert out[0].detail.startswith("compile phase: not compiled within 3 s (nothing of it launched yet)")


def test_injected_faults(monkeypatch):
    """MULTICTA_DOCTOR_INJECT: a crash in one check, a compile that never ends in another; each costs one check.
    (The hang and sticky faults launch kernels: a GPU shows them; here their kernels compile.)"""
    d = selftests.DEMO
    monkeypatch.setenv(doctor.INJECT_ENV, "crash:fail,slow-compile:pass")
    monkeypatch.setenv(selftests.DEMO_COMPILE_ENV, "0")
    out = doctor.run_checks([d["fail"], d["pass"], d["slow-compile"]], timeout=5, compile_timeout=3,
                            log=lambda _: None)
    assert [o.status for o in out] == ["CRASH", "SLOW", "PASS"]
    assert "injected fault: aborting the process" in out[0].detail and out[0].detail.startswith("run phase")
    assert out[1].detail.startswith("compile phase")


def test_fault_names_are_checked():
    assert doctor.faults("hang:softmax, sticky:ping_pong") == {"softmax": "hang", "ping_pong": "sticky"}
    for bad in ("freeze:softmax", "hang", "hang:"):
        with pytest.raises(ValueError, match="KIND:CHECK"):
            doctor.faults(bad)
    with pytest.raises(ValueError, match="no check 'sofmax'"):
        doctor.faults("hang:sofmax", known=selftests.CHECKS)


def test_cli_refuses_a_misspelt_fault(monkeypatch, capsys):
    monkeypatch.setenv(doctor.INJECT_ENV, "hang:sofmax")
    with pytest.raises(SystemExit) as e:
        doctor.main([])
    assert e.value.code == 2 and "no check 'sofmax'" in capsys.readouterr().err


@pytest.mark.parametrize("target", ["sm_90a", "sm_100a"])
def test_fault_kernels_do_what_they_say(target):
    """The sticky fault's kernel executes `trap;`; the hang's spins on volatile loads of a flag nobody sets."""
    from multicta_kernels import lens
    trap = lens.compile(lens.KernelSpec("trap", doctor.trap_kernel, {"flag": "*i32"}, language="triton",
                                        targets=(target,)), target)
    assert trap.census(["trap;"])["trap;"] == 1
    spin = lens.compile(lens.KernelSpec("spin", doctor.spin_kernel, {"flag": "*i32"}, language="triton",
                                        targets=(target,)), target)
    assert "ld.volatile.global" in lens.loop_body(spin.ptx)


def _record(tmp_path, gpu, rows):
    folder = tmp_path / labels.gpu_folder(gpu)
    folder.mkdir(parents=True)
    (folder / "doctor.json").write_text(json.dumps({
        "benchmark": "doctor", "gpu": gpu, "date": "2026-12-01", "triton": "3.9.0", "method": {}, "ceilings": {},
        "columns": ["check", "chapter", "feature", "status"], "rows": rows}))


def test_labels_come_from_recorded_runs(tmp_path):
    assert results.label(TCGEN05, tmp_path) == "compiled for sm_100a and audited; not yet run on a Blackwell GPU"
    _record(tmp_path, "NVIDIA H200", [["softmax", "1", "clusters", "PASS"], ["hopper_matmul", "6", "wgmma", "PASS"],
                                      ["clc_matmul", "5", "tcgen05", "SKIP"]])
    assert results.label(WGMMA, tmp_path) == "ran on NVIDIA H200, 2026-12-01"
    assert results.label(TCGEN05, tmp_path).startswith("compiled for sm_100a")
    _record(tmp_path, "NVIDIA B200", [["clc_matmul", "5", "tcgen05", "PASS"], ["mma_tile", "4", "tcgen05", "HANG"]])
    assert results.label(TCGEN05, tmp_path).startswith("compiled for sm_100a"), "one failed check: not 'ran'"
    assert labels.gpu_folder("NVIDIA B200") == "b200" and labels.gpu_folder("NVIDIA H100 80GB HBM3") == "h100-80gb-hbm3"


def test_generated_tables_in_the_docs_are_current():
    """README and the workshop guide carry the status table between markers; regenerate with
    `python tools/update_docs.py` (the package itself writes no document)."""
    import sys
    sys.path.insert(0, str(results.RESULTS.parent / "tools"))
    import update_docs
    for rel in update_docs.DOCS:
        text = (results.RESULTS.parent / rel).read_text()
        assert labels.MARK_BEGIN in text, f"{rel} lacks the generated status block"
        assert labels.render_docs(text) == text, f"{rel} is stale: run python tools/update_docs.py"
    assert update_docs.stale() == [] and update_docs.main(["--check"]) == 0


def test_cli_without_a_gpu_says_so_and_succeeds(capsys):
    if hardware.device().capability is not None:
        pytest.skip("a GPU is present")
    assert doctor.main([]) == 0
    out = capsys.readouterr().out
    assert "python " in out and "triton 3.9" in out and "nothing runs live" in out
    assert doctor.main(["--list"]) == 0
    assert "clc_matmul" in capsys.readouterr().out


def test_every_check_is_a_function():
    for c in selftests.CHECKS.values():
        assert callable(c.fn) and c.fn.__name__ == f"check_{c.name}", c.name
        assert c.chapter in labels.CHAPTERS and c.feature in labels.CHAPTER_FEATURES[c.chapter]
    assert {c.feature for c in selftests.CHECKS.values()} >= {CLUSTERS, WGMMA, TCGEN05}


def test_census_diff_lists_only_what_changed():
    import dataclasses
    from multicta_kernels import catalog, lens
    from multicta_kernels.show import notebook
    base = catalog.compile("barrier_cost", "sm_90a", num_ctas=2, mode=1)
    spec = catalog.spec("barrier_cost", num_ctas=2, mode=5)                 # the same round, with fences
    html = notebook.census_diff(base, lens.compile(dataclasses.replace(spec), "sm_90a")).data
    assert "fence.acq_rel.cluster" in html and "<td>0</td><td>3</td><td>3</td>" in html
    same = notebook.census_diff(base, base).data
    assert "no instruction count changed" in same


def test_record_on_blackwell_also_records_its_benchmarks_and_timeline_in_children(tmp_path, monkeypatch):
    """--record --bench on a (pretended) B200: the clc-matmul benchmark and chapter 5's timeline are recorded,
    each handed to the runner (a child process with its own time limit), never run in this process."""
    from multicta_kernels.cli import bench
    from multicta_kernels.results import store
    calls = []
    monkeypatch.setattr(store, "environment", lambda: {"gpu": "NVIDIA B200", "date": "2026-12-01", "triton": "3.9.0"})
    monkeypatch.setattr(bench, "run", lambda *a, **k: pytest.fail("the benchmark ran in the parent"))
    monkeypatch.setattr(recorders, "record_clc_timeline", lambda *a, **k: pytest.fail("the timeline ran in the parent"))
    monkeypatch.setattr(doctor, "RESULTS", tmp_path)

    def runner(checks, timeout, env, log):
        calls.append(([c.name for c in checks], timeout, env))
        return [doctor.Outcome(c, "PASS", 1.0, "wrote ...") for c in checks]
    monkeypatch.setattr(doctor, "run_checks", runner)
    outcome = doctor.Outcome(selftests.CHECKS["clc_matmul"], "PASS", 1.0, "ok", 12.0)
    with hardware.pretend((10, 0), "NVIDIA B200") as dev:
        recorded = doctor._record([outcome], dev, False, bench=True, log=lambda _: None)
    folder = str(tmp_path / "b200")
    assert calls == [(["clc_matmul_benchmark"], 1800.0, {recorders.FOLDER_ENV: folder}),
                     (["clc_matmul_timeline"], 900.0, {recorders.FOLDER_ENV: folder})]
    assert [o.status for o in recorded] == ["PASS", "PASS"] and not any(c.phases for c in recorders.RECORDERS.values())
    rows = results.records(results.load(tmp_path / "b200" / "doctor.json"))
    assert rows[0]["seconds"] == 1.0 and rows[0]["compile_seconds"] == 12.0


def test_a_run_with_injected_faults_is_recorded_apart(tmp_path, monkeypatch):
    """--record with MULTICTA_DOCTOR_INJECT writes doctor_injected.json (naming the faults), never doctor.json,
    and records no benchmark."""
    from multicta_kernels.results import store
    monkeypatch.setattr(store, "environment", lambda: {"gpu": "NVIDIA H200", "date": "2026-12-02", "triton": "3.9.0"})
    monkeypatch.setattr(doctor, "RESULTS", tmp_path)
    monkeypatch.setenv(doctor.INJECT_ENV, "hang:softmax")
    monkeypatch.setattr(doctor, "run_checks", lambda *a, **k: pytest.fail("a benchmark was recorded"))
    outcome = doctor.Outcome(selftests.CHECKS["softmax"], "HANG", 20.0, "run phase: no answer in 20 s")
    with hardware.pretend((9, 0), "NVIDIA H200") as dev:
        assert doctor._record([outcome], dev, False, bench=True, log=lambda _: None) == []
    assert not (tmp_path / "h200" / "doctor.json").exists()
    record = results.load(tmp_path / "h200" / "doctor_injected.json")
    assert record["method"]["injected"] == {"softmax": "hang: " + doctor.FAULTS["hang"]}
    assert results.records(record)[0]["status"] == "HANG"


def test_a_recorder_that_hangs_is_killed(tmp_path, monkeypatch):
    """The recorders run through the runner: one that never returns is reported HANG after its limit, and
    --record returns."""
    from multicta_kernels.results import store
    monkeypatch.setattr(store, "environment", lambda: {"gpu": "NVIDIA B200", "date": "2026-12-01", "triton": "3.9.0"})
    monkeypatch.setattr(doctor, "RESULTS", tmp_path)
    hang = selftests.Check("hang", "demo", hardware.CUDA, selftests.DEMO["hang"].fn, "hang", phases=False)
    monkeypatch.setattr(doctor, "RECORDERS", {"hang": hang})
    monkeypatch.setattr(doctor, "RECORD_TIMEOUT", {"hang": 4.0})
    with hardware.pretend((10, 0), "NVIDIA B200") as dev:
        (o,) = doctor._record([doctor.Outcome(selftests.CHECKS["clc_matmul"], "PASS", 1.0, "ok")], dev, False,
                              bench=True, log=lambda _: None)
    assert o.status == "HANG" and o.detail.startswith("no answer within 4 s, compile included") and o.seconds < 20


def test_the_recorders_write_where_they_are_told(tmp_path, monkeypatch):
    from multicta_kernels.cli import bench
    from multicta_kernels.results import store
    calls = []
    monkeypatch.setenv(recorders.FOLDER_ENV, str(tmp_path))
    monkeypatch.setattr(bench, "run", lambda name, out, quick=False: calls.append((name, out)))
    monkeypatch.setattr(store, "environment", lambda: {"gpu": "NVIDIA B200"})
    monkeypatch.setattr(recorders, "record_clc_timeline", lambda folder, env: calls.append((folder, env["gpu"])) or "t.json")
    assert recorders._record_clc_benchmark() == f"wrote {tmp_path / 'clc_matmul.json'}"
    assert recorders._record_clc_timeline() == "wrote t.json"
    assert calls == [("clc-matmul", tmp_path / "clc_matmul.json"), (tmp_path, "NVIDIA B200")]


def test_cli_refuses_what_would_silently_check_nothing(capsys):
    with pytest.raises(SystemExit) as e:
        doctor.main(["--only", "sofmax"])
    assert e.value.code == 2 and "--only sofmax: no such check or chapter" in capsys.readouterr().err
    for flags in (["--bench"], ["--out", "x.json"]):
        with pytest.raises(SystemExit):
            doctor.main(flags)
        assert "go with --record" in capsys.readouterr().err
    todo, skipped = doctor.plan(hardware.device(), "softmax,6")
    assert {c.name for c in todo} | {o.check.name for o in skipped} == {"softmax", "hopper_matmul"}
