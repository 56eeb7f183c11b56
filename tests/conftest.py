"""GPU tests are marked by the feature they need (clusters, wgmma, tcgen05: see
multicta_kernels.hardware) and skipped where the GPU lacks it; `pytest -m gpu` selects them all.
Sanitizer tests (consan: minutes of recompiles) run only when asked for: `pytest -m consan`."""
import pytest

from multicta_kernels import hardware

MARKS = {"clusters": hardware.CLUSTERS, "wgmma": hardware.WGMMA, "tcgen05": hardware.TCGEN05, "cuda": hardware.CUDA}


def pytest_collection_modifyitems(config, items):
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
