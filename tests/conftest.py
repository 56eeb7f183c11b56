"""GPU tests are marked by the feature they need (clusters, wgmma, tcgen05: see
multicta_kernels.core.hardware) and skipped where the GPU lacks it; `pytest -m gpu` selects them all.
Sanitizer tests (consan: minutes of recompiles) run only when asked for: `pytest -m consan`.
`pytest --blackwell-dry-run` walks the tcgen05 tests on a CPU up to their launches (blackwell_dry_run.py)."""
import os

import pytest

from blackwell_dry_run import (pytest_addoption, pytest_configure, pytest_report_teststatus,  # noqa: F401
                               pytest_runtest_call, pytest_unconfigure)
from blackwell_dry_run import select as dry_run_select
from multicta_kernels.core import hardware


def pytest_sessionstart(session):
    """``MULTICTA_MUTANT=file``: the mutation harness (python -m multicta_kernels.cli.mutate) runs these tests against
    a mutant kernel; it replaces the original in every module of the package before any test runs."""
    if os.environ.get("MULTICTA_MUTANT"):
        from multicta_kernels.cli import mutate
        mutate.load(os.environ["MULTICTA_MUTANT"])


MARKS = {"clusters": hardware.CLUSTERS, "wgmma": hardware.WGMMA, "tcgen05": hardware.TCGEN05, "cuda": hardware.CUDA}


def pytest_collection_modifyitems(config, items):
    dry_run_select(config, items)          # pytest --blackwell-dry-run: the tcgen05 tests only (blackwell_dry_run.py)
    here = hardware.device()
    asked_for_consan = "consan" in (config.option.markexpr or "")
    for item in items:
        needed = [f for mark, f in MARKS.items() if mark in item.keywords]
        if needed:
            item.add_marker(pytest.mark.gpu)
        for f in needed:
            if not here.has(f):
                item.add_marker(pytest.mark.skip(reason=f"needs {f.what} ({f.runs_on}); this machine: {here}"))
        if "consan" in item.keywords and not any(here.has(f) for f in needed or [hardware.CLUSTERS]):
            item.add_marker(pytest.mark.skip(reason="the sanitizer runs on a GPU"))
        elif "consan" in item.keywords and not asked_for_consan:
            item.add_marker(pytest.mark.skip(reason="slow (the concurrency sanitizer): run with pytest -m consan"))
