"""``pytest --blackwell-dry-run``: every ``tcgen05`` test, on a CPU, as a B200 would run it, up to its launches.

The whole session pretends a B200 (``multicta_kernels.core.dryrun.dry_run``: 148 SMs, sm_100). Only the tests
marked ``tcgen05`` are collected (the sanitizer's are left out: they start a GPU process of their own);
each runs with its launches stopped after compiling for sm_100a and checking what the driver would
check, its comparisons skipped (nothing ran: each line says how many), and one line per test says
what it compiled and launched. A test that launches nothing fails: it would not have tested a B200
either. Used by ``make blackwell-dry-run``; conftest.py imports these hooks.
"""
import contextlib

import pytest

from multicta_kernels.core import dryrun

OPTION = "--blackwell-dry-run"
_SESSION = []


def pytest_addoption(parser):
    parser.addoption(OPTION, action="store_true",
                     help="run the tcgen05 tests on the CPU with a B200 pretended, each stopped at its launches "
                          "after compiling them for sm_100a (make blackwell-dry-run)")


def enabled(config) -> bool:
    return bool(config.getoption(OPTION, default=False))


def pytest_configure(config):
    if enabled(config):                    # before collection: skip marks read hardware.has() at import time
        ctx = dryrun.dry_run()
        ctx.__enter__()
        _SESSION.append(ctx)


def pytest_unconfigure(config):
    while _SESSION:
        _SESSION.pop().__exit__(None, None, None)


def select(config, items) -> None:
    """Keep only the tcgen05 tests (not the sanitizer's); called from conftest's collection hook."""
    if not enabled(config):
        return
    keep = [i for i in items if "tcgen05" in i.keywords and "consan" not in i.keywords]
    drop = [i for i in items if i not in keep]
    if drop:
        config.hook.pytest_deselected(items=drop)
    items[:] = keep


def pytest_report_teststatus(report, config):
    """No progress dot for a walked test: its own line says it."""
    if enabled(config) and report.when == "call" and report.passed:
        return "passed", "", "PASSED"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    if not enabled(item.config):
        return (yield)
    with dryrun.dry_run() as s:
        result = yield
    launched = [ln for ln in s.launches if ln.launched]
    reporter = item.config.pluginmanager.get_plugin("terminalreporter")
    capture = item.config.pluginmanager.get_plugin("capturemanager")
    if reporter is not None:
        with capture.global_and_fixture_disabled() if capture else contextlib.nullcontext():
            if reporter._tw.width_of_current_line:          # after the progress dots: a line of its own
                reporter._tw.line()
            reporter.write_line(f"[dry run] {item.nodeid}: {s.summary()}")
    if not launched:
        raise AssertionError(f"{item.nodeid} launched no kernel in the dry run: on a B200 it would test nothing")
    return result
