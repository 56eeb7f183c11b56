"""The doctor, on the CPU: its runner reports PASS, FAIL, HANG and CRASH from child processes, and
the book's "ran on ..." labels are generated from recorded results, never typed."""
import json

import pytest

from multicta_kernels import doctor, hardware
from multicta_kernels.hardware import CLUSTERS, TCGEN05, WGMMA


def test_runner_survives_fail_hang_and_crash():
    """A hang is killed after its time limit and the checks after it still run, in a fresh child."""
    d = doctor.DEMO
    lines = []
    out = doctor.run_checks([d["pass"], d["fail"], d["hang"], d["crash"], d["pass"]], timeout=8, log=lines.append)
    assert [o.status for o in out] == ["PASS", "FAIL", "HANG", "CRASH", "PASS"]
    assert "element [3, 4] differs" in out[1].detail
    assert "killed" in out[2].detail and 7 < out[2].seconds < 20
    assert "about to abort" in out[3].detail
    assert len(lines) == 5 and all(ln.startswith("[doctor] chdemo") for ln in lines)


def _record(tmp_path, gpu, rows):
    folder = tmp_path / doctor.gpu_folder(gpu)
    folder.mkdir(parents=True)
    (folder / "doctor.json").write_text(json.dumps({
        "benchmark": "doctor", "gpu": gpu, "date": "2026-12-01", "triton": "3.9.0", "method": {}, "ceilings": {},
        "columns": ["check", "chapter", "feature", "status"], "rows": rows}))


def test_labels_come_from_recorded_runs(tmp_path):
    assert doctor.label(TCGEN05, tmp_path) == "compiled for sm_100a and audited; not yet run on a Blackwell GPU"
    _record(tmp_path, "NVIDIA H200", [["softmax", "1", "clusters", "PASS"], ["hopper_matmul", "6", "wgmma", "PASS"],
                                      ["clc_matmul", "5", "tcgen05", "SKIP"]])
    assert doctor.label(WGMMA, tmp_path) == "ran on NVIDIA H200, 2026-12-01"
    assert doctor.label(TCGEN05, tmp_path).startswith("compiled for sm_100a")
    _record(tmp_path, "NVIDIA B200", [["clc_matmul", "5", "tcgen05", "PASS"], ["mma_tile", "4", "tcgen05", "HANG"]])
    assert doctor.label(TCGEN05, tmp_path).startswith("compiled for sm_100a"), "one failed check: not 'ran'"
    assert doctor.gpu_folder("NVIDIA B200") == "b200" and doctor.gpu_folder("NVIDIA H100 80GB HBM3") == "h100-80gb-hbm3"


def test_generated_tables_in_the_docs_are_current():
    """README and the workshop guide carry the status table between markers; regenerate with
    `python -m multicta_kernels.doctor --update-docs`."""
    for rel in doctor.DOCS:
        text = (doctor.RESULTS.parent / rel).read_text()
        assert doctor.MARK_BEGIN in text, f"{rel} lacks the generated status block"
        assert doctor.render_docs(text) == text, f"{rel} is stale: run python -m multicta_kernels.doctor --update-docs"


def test_cli_without_a_gpu_says_so_and_succeeds(capsys):
    if hardware.device().capability is not None:
        pytest.skip("a GPU is present")
    assert doctor.main([]) == 0
    out = capsys.readouterr().out
    assert "python " in out and "triton 3.9" in out and "nothing runs live" in out
    assert doctor.main(["--list"]) == 0
    assert "clc_matmul" in capsys.readouterr().out


def test_every_check_names_an_existing_function():
    import importlib
    for c in doctor.CHECKS.values():
        module, fn = c.fn.split(":")
        assert callable(getattr(importlib.import_module(module), fn)), c.name
        assert c.chapter in doctor.CHAPTERS and c.feature in doctor.CHAPTER_FEATURES[c.chapter]
    assert {c.feature for c in doctor.CHECKS.values()} >= {CLUSTERS, WGMMA, TCGEN05}


def test_census_diff_lists_only_what_changed():
    import dataclasses
    from multicta_kernels import catalog, lens, notebook
    base = catalog.compile("barrier_cost", "sm_90a", num_ctas=2, mode=1)
    spec = catalog.spec("barrier_cost", num_ctas=2, mode=3)                 # the same round, with fences
    html = notebook.census_diff(base, lens.compile(dataclasses.replace(spec), "sm_90a")).data
    assert "fence.acq_rel.cluster" in html and "<td>0</td><td>3</td><td>3</td>" in html
    same = notebook.census_diff(base, base).data
    assert "no instruction count changed" in same


def test_record_on_blackwell_also_records_its_benchmarks_and_timeline(tmp_path, monkeypatch):
    """--record --bench on a (pretended) B200: the clc-matmul benchmark and chapter 5's timeline are recorded."""
    from multicta_kernels import bench
    calls = []
    monkeypatch.setattr(bench, "environment", lambda: {"gpu": "NVIDIA B200", "date": "2026-12-01", "triton": "3.9.0"})
    monkeypatch.setattr(bench, "run", lambda name, out, quick=False: calls.append(("bench", name)))
    monkeypatch.setattr(doctor, "record_clc_timeline", lambda folder, env: calls.append(("timeline", env["gpu"])))
    monkeypatch.setattr(doctor, "RESULTS", tmp_path)
    outcome = doctor.Outcome(doctor.CHECKS["clc_matmul"], "PASS", 1.0, "ok")
    with hardware.pretend((10, 0), "NVIDIA B200") as dev:
        doctor._record([outcome], dev, False, bench=True)
    assert calls == [("bench", "clc-matmul"), ("timeline", "NVIDIA B200")]
    assert (tmp_path / "b200" / "doctor.json").exists()


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
