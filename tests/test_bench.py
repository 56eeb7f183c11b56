"""The results store: every recorded result carries its provenance; the writer is atomic."""
import json
from pathlib import Path

import pytest

from multicta_kernels import results
from multicta_kernels.cli import bench

RESULTS = sorted(p for p in Path(results.RESULTS).rglob("*.json"))


def test_there_are_results():
    assert any("reference" not in p.parts for p in RESULTS)


@pytest.mark.parametrize("path", RESULTS, ids=lambda p: str(p.relative_to(results.RESULTS)))
def test_recorded_results_are_complete(path):
    r = results.load(path)
    if "reference" in path.parts:
        assert r["reference"] is True and r["source"]
    else:
        assert r["gpu"] and r["triton"] == "3.9.0" and r["method"]["timer"]
        assert isinstance(r["ceilings"], dict)
        if r["benchmark"].startswith("softmax"):
            assert r["ceilings"]["copy_gbps"] > 0
    assert all(len(row) == len(r["columns"]) for row in r["rows"])


def test_softmax_record_covers_the_seed_shapes():
    from multicta_kernels.softmax import ODD_SHAPES, TUTORIAL_SHAPES
    r = results.load("h200/softmax.json")
    shapes = {(row["M"], row["N"]) for row in results.records(r)}
    assert set(TUTORIAL_SHAPES + ODD_SHAPES) <= shapes


def test_save_is_atomic_and_validated(tmp_path):
    good = {"benchmark": "x", "gpu": "g", "date": "2026-01-01", "triton": "3.9.0", "method": {}, "ceilings": {},
            "columns": ["a"], "rows": [[1]]}
    p = results.save(good, tmp_path / "d" / "x.json")
    assert json.loads(p.read_text())["rows"] == [[1]]
    with pytest.raises(ValueError, match="lacks"):
        results.save({"rows": [[1]]}, tmp_path / "bad.json")
    with pytest.raises(ValueError, match="wrong width"):
        results.save({**good, "rows": [[1, 2]]}, tmp_path / "bad.json")
    assert not (tmp_path / "bad.json").exists()
    assert not list(tmp_path.glob("**/*.tmp"))


def test_cli_refuses_without_a_gpu_in_one_line(capsys, tmp_path):
    """No traceback and no file: one line that says what the benchmark needs."""
    from multicta_kernels.core import hardware
    if hardware.device().capability is not None:
        pytest.skip("a GPU is present")
    out = tmp_path / "softmax.json"
    with pytest.raises(SystemExit) as exc:
        bench.main(["softmax", "--quick", "--out", str(out)])
    assert str(exc.value).startswith("bench: the softmax benchmark needs") and "\n" not in str(exc.value)
    assert not out.exists()
    with pytest.raises(SystemExit):
        bench.main(["no-such-benchmark"])


@pytest.mark.parametrize("where, bad", [("rows", [[float("nan")]]), ("rows", [[float("inf")]]),
                                        ("ceilings", {"copy_gbps": float("-inf")}), ("method", {"ms": [1.0, float("nan")]})])
def test_save_refuses_a_number_that_is_not_finite(tmp_path, where, bad):
    """A NaN or an infinity anywhere in a result is a failed measurement: refused, naming where, nothing written."""
    good = {"benchmark": "x", "gpu": "g", "date": "2026-01-01", "triton": "3.9.0", "method": {}, "ceilings": {},
            "columns": ["a"], "rows": [[1.0]]}
    with pytest.raises(ValueError, match=rf"not finite.*first at \['?{where}"):
        results.save({**good, where: bad}, tmp_path / "bad.json")
    assert not (tmp_path / "bad.json").exists() and not list(tmp_path.glob("*.tmp"))
    assert results.save(good, tmp_path / "good.json").exists()
