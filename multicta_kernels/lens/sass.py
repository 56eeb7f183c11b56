"""SASS and resources, from Triton's own ``ptxas`` and ``cuobjdump`` (no GPU needed)."""
from __future__ import annotations

import collections
import os
import re
import tempfile

from ..core.hardware import TARGETS
from ..core import validate


def resources(ptx: str, target: str) -> dict:
    validate.text(ptx, "ptx")
    validate.target(target)
    import subprocess

    from triton.backends.nvidia.compiler import get_ptxas
    with tempfile.NamedTemporaryFile("w", suffix=".ptx") as f:
        f.write(ptx)
        f.flush()
        run = subprocess.run([get_ptxas(TARGETS[target]).path, "-v", f"--gpu-name={target}", f.name, "-o", os.devnull],
                             capture_output=True, text=True)
    if run.returncode:
        raise RuntimeError(f"ptxas failed: {run.stderr.strip().splitlines()[-1] if run.stderr.strip() else run.returncode}")
    text = run.stderr

    def number(pattern):
        m = re.search(pattern, text)
        return int(m.group(1)) if m else 0
    return {"registers": number(r"Used (\d+) registers"), "spill_stores": number(r"(\d+) bytes spill stores"),
            "spill_loads": number(r"(\d+) bytes spill loads"),
            "stack": max(number(r"(\d+) bytes stack frame"), number(r"(\d+) bytes cumulative stack size"))}


# ------------------------------------------------------------------ SASS, from Triton's own ptxas

def sass(ptx: str, target: str = "sm_90a") -> list[str]:
    """The SASS that Triton's bundled ``ptxas`` makes of this PTX, read with its ``cuobjdump`` (no GPU
    needed): [instruction text], predicates included. Raises OSError or CalledProcessError where the
    installation has no ptxas or cuobjdump."""
    validate.text(ptx, "ptx")
    validate.target(target)
    import subprocess

    from triton import knobs
    from triton.backends.nvidia.compiler import get_ptxas
    with tempfile.TemporaryDirectory() as d:
        src, cubin = os.path.join(d, "k.ptx"), os.path.join(d, "k.cubin")
        with open(src, "w") as f:
            f.write(ptx)
        subprocess.run([get_ptxas(TARGETS[target]).path, f"--gpu-name={target}", src, "-o", cubin],
                       check=True, capture_output=True)
        dump = subprocess.run([knobs.nvidia.cuobjdump.path, "-sass", cubin], check=True, capture_output=True, text=True)
    return [m.group(1).strip() for m in re.finditer(r"/\*[0-9a-f]{4}\*/\s+([^;]*);", dump.stdout)]


def sass_census(ptx: str, target: str = "sm_90a") -> collections.Counter:
    """SASS opcodes (with their modifiers, e.g. ``MEMBAR.ALL.GPU``) and how often each occurs in the kernel."""
    return collections.Counter(t.split()[1] if t.startswith("@") else t.split()[0] for t in sass(ptx, target))
