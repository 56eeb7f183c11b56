"""The results store: every recorded result carries its provenance; the writer is atomic."""
import json
from pathlib import Path

import pytest

from multicta_kernels import bench

RESULTS = sorted(p for p in Path(bench.RESULTS).rglob("*.json"))


def test_there_are_results():
    assert any("reference" not in p.parts for p in RESULTS)


@pytest.mark.parametrize("path", RESULTS, ids=lambda p: str(p.relative_to(bench.RESULTS)))
def test_recorded_results_are_complete(path):
    r = bench.load(path)
    if "reference" in path.parts:
        assert r["reference"] is True and r["source"]
    else:
        assert r["gpu"] and r["triton"] == "3.9.0" and r["method"]["timer"]
        assert isinstance(r["ceilings"], dict)
        if r["benchmark"].startswith("softmax"):
            assert r["ceilings"]["copy_gbps"] > 0
    assert all(len(row) == len(r["columns"]) for row in r["rows"])


def test_softmax_record_covers_the_seed_shapes():
    from multicta_kernels.softmax import ODD_SHAPES, SEED_SHAPES
    r = bench.load("h200/softmax.json")
    shapes = {(row["M"], row["N"]) for row in bench.records(r)}
    assert set(SEED_SHAPES + ODD_SHAPES) <= shapes


def test_save_is_atomic_and_validated(tmp_path):
    good = {"benchmark": "x", "gpu": "g", "date": "2026-01-01", "triton": "3.9.0", "method": {}, "ceilings": {},
            "columns": ["a"], "rows": [[1]]}
    p = bench.save(good, tmp_path / "d" / "x.json")
    assert json.loads(p.read_text())["rows"] == [[1]]
    with pytest.raises(ValueError, match="lacks"):
        bench.save({"rows": [[1]]}, tmp_path / "bad.json")
    with pytest.raises(ValueError, match="wrong width"):
        bench.save({**good, "rows": [[1, 2]]}, tmp_path / "bad.json")
    assert not (tmp_path / "bad.json").exists()
    assert not list(tmp_path.glob("**/*.tmp"))


def test_cli_refuses_without_a_gpu_in_one_line(capsys, tmp_path):
    """No traceback and no file: one line that says what the benchmark needs."""
    from multicta_kernels import hardware
    if hardware.device().capability is not None:
        pytest.skip("a GPU is present")
    out = tmp_path / "softmax.json"
    with pytest.raises(SystemExit) as exc:
        bench.main(["softmax", "--quick", "--out", str(out)])
    assert str(exc.value).startswith("bench: the softmax benchmark needs") and "\n" not in str(exc.value)
    assert not out.exists()
    with pytest.raises(SystemExit):
        bench.main(["no-such-benchmark"])
