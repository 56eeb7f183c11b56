"""Every live kernel of the doctor, on its small inputs, under Triton's concurrency sanitizer
(TRITON_INSTRUMENTATION_MODE=consan): races on shared memory and barrier misuse are reported by the
instrumented kernel. Slow (each kernel is recompiled with instrumentation): `pytest -m consan`."""
import pytest

from multicta_kernels.cli import doctor, selftests

CONSAN = {"TRITON_INSTRUMENTATION_MODE": "consan"}
MARK = {"cuda": pytest.mark.cuda, "clusters": pytest.mark.clusters, "wgmma": pytest.mark.wgmma,
        "tcgen05": pytest.mark.tcgen05}


@pytest.mark.consan
@pytest.mark.parametrize("name", [pytest.param(n, marks=MARK[c.feature.name]) for n, c in selftests.CHECKS.items()])
def test_passes_under_the_sanitizer(name):
    (outcome,) = doctor.run_checks([selftests.CHECKS[name]], timeout=600, env=CONSAN, log=lambda _: None)
    assert outcome.status == "PASS", f"{outcome.status}: {outcome.detail}"
