#!/usr/bin/env python3
"""Run a command and pass its output through, less two kinds of noise a newcomer cannot act on:

- ipykernel's "Kernel is running over TCP without encryption" warning, logged by every notebook kernel that
  nbval and the book build start (kernels on this machine's loopback, started by this process);
- nanobind's reference-leak report, which Triton's extension prints when the interpreter exits (its
  ``nb::set_leak_warnings`` is not exposed to Python): "nanobind: leaked N functions!" and its list.

    python tools/quiet.py CMD [ARGS...]     # exit status: CMD's; one closing line says how many lines it dropped

The Makefile's test and book targets run through it; run a command without it to see everything.
"""
from __future__ import annotations

import os
import re
import subprocess
import sys

NOISE = re.compile(r"Kernel is running over TCP without encryption|^nanobind: (leaked \d+ |this is likely caused)"
                   r"|^ - leaked (function|type|instance)|^ - \.\.\. skipped remainder"
                   r"|^See https://nanobind\.readthedocs\.io/en/latest/refleaks\.html")


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__.strip().splitlines()[3].strip(), file=sys.stderr)
        return 2
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, bufsize=0)
    dropped = 0
    for raw in iter(proc.stdout.readline, b""):
        text = raw.decode("utf-8", "replace")
        if NOISE.search(re.sub(r"\x1b\[[0-9;]*m", "", text)):
            dropped += 1
            continue
        sys.stdout.write(text)
        sys.stdout.flush()
    rc = proc.wait()
    if dropped:
        print(f"(tools/quiet.py: {dropped} lines of kernel-transport warnings and nanobind leak reports left out)")
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
