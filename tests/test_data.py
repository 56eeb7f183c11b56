"""The package's data (multicta_kernels/data/) is what tools/update_data.py writes from results/ now: the softmax
picker chooses from the recorded sweeps without reading anything outside the package."""
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

import update_data  # noqa: E402

from multicta_kernels import results, softmax  # noqa: E402


def test_the_data_is_what_the_tool_writes_now():
    for path, text in update_data.files().items():
        assert path.exists(), f"{path.name} is missing: run python tools/update_data.py"
        assert path.read_text() == text, f"{path.name} is stale: run python tools/update_data.py"
    assert update_data.main(["--check"]) == 0


def test_the_picker_reads_the_recorded_sweeps_from_the_package():
    recs, meta = softmax.recorded_sweeps("h200")
    want = [{**r, "dtype": r.get("dtype", res["method"]["dtype"]), "exchange": r.get("exchange"),   # provenance
             "date": res["date"]}
            for res in (results.load(f"h200/{name}") for name in softmax.SWEEPS) for r in results.records(res)]
    assert list(recs) == want and meta["gpu"] == results.load("h200/softmax_sweep.json")["gpu"]
    assert {r["dtype"] for r in recs} == {"float32", "float16", "bfloat16"}
    data = json.loads((ROOT / "multicta_kernels" / "data" / softmax.SWEEPS_DATA).read_text())
    assert set(data) == {"h200"} and data["h200"]["sources"] == [f"results/h200/{n}" for n in softmax.SWEEPS]
    assert softmax.recorded_sweeps("no-such-gpu") == ((), None)
