"""Part 0's "Change it and see" invites an error (MY_BLOCK = 6: tl.arange needs a power of two). The
reader gets Triton's reason in one line, and the cells after it say that nothing ran instead of
failing with a NameError (issue 26). The notebook's own cells, up to the section's check, are run in
a Jupyter kernel (nbval) with the one change the text asks for, and a last cell checks what they
left behind."""
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PART0 = ROOT / "notebooks" / "00-triton-foundations.ipynb"
YOURS, CHECK = "43a1e9c2", "daed720f"


def test_a_block_that_is_not_a_power_of_two_is_one_line_and_nothing_breaks(tmp_path):
    nb = json.loads(PART0.read_text())
    ids = [c["id"] for c in nb["cells"]]
    cells = nb["cells"][:ids.index(CHECK) + 1]
    yours = next(c for c in cells if c["id"] == YOURS)
    src = "".join(yours["source"])
    assert src.count("MY_BLOCK = 8 ") == 1, "the cell no longer sets MY_BLOCK = 8"
    yours["source"] = src.replace("MY_BLOCK = 8 ", "MY_BLOCK = 6 ")
    cells.append({"cell_type": "code", "id": "check6", "metadata": {}, "execution_count": None,
                  "outputs": [], "source": (
                      'assert yours is None and list(runs) == ["package"], (yours, runs)\n'
                      'assert failed == "ValueError: arange\'s range must be a power of 2", failed\n'
                      'assert "\\n" not in failed, failed\n')})
    nb["cells"] = cells
    path = tmp_path / "part0_block6.ipynb"
    path.write_text(json.dumps(nb))
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ""}          # the interpreter's path, as on a CPU
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax",
                          "--nbval-current-env", str(path)], cwd=tmp_path, env=env, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:]
