"""Bad input (issue 25): every case the sweep found, refused with one line naming the parameter or answered right,
and the sweep itself on a sample (tools/bad_input_sweep.py; the full run is results/bad_input_sweep.json)."""
import json
import re
import sys
import time
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))

import bad_input_sweep as sweep  # noqa: E402

from multicta_kernels import barriers, foundations, lens, multicast, primer, protocols, softmax, two_cta  # noqa: E402
from multicta_kernels import clc_matmul as ch5  # noqa: E402
from multicta_kernels import hopper_matmul as ch6  # noqa: E402
from multicta_kernels.core import isolation, layouts, validate  # noqa: E402
from multicta_kernels.core.hardware import UnsupportedHardwareError  # noqa: E402
from multicta_kernels.gluon import operands, tile_order  # noqa: E402
from multicta_kernels.measure import traces  # noqa: E402
from multicta_kernels.protocols import models  # noqa: E402

HUGE = 2 ** 40


def refused(call, param, exc=(ValueError, TypeError)):
    """``call()`` raises ``exc`` with one line that names ``param``."""
    with pytest.raises(exc) as info:
        call()
    msg = str(info.value)
    assert "\n" not in msg and re.search(rf"(?<![\w]){re.escape(param)}(?![\w])", msg), msg
    return msg


# ----------------------------------------------------------------------- verdicts that certified a bug
@pytest.mark.parametrize("call, param", [
    (lambda: protocols.check(models.tile_stream(2, "none"), depth=0), "depth"),
    (lambda: protocols.check(models.tile_stream(2, "none"), depth=-1), "depth"),
    (lambda: protocols.check(models.ping_pong(2, 0)), "rounds"),
    (lambda: protocols.check(models.clc_matmul(tiles=0)), "tiles"),
    (lambda: protocols.simulate(models.tile_stream(2, "none"), runs=-5), "runs"),
    (lambda: protocols.simulate(models.tile_stream(2, "none"), runs=0), "runs"),
    (lambda: protocols.check_book(names=["nonesuch"]), "names"),
    (lambda: protocols.check_book(names="ch2 exchange, 4 CTAs"), "names"),
    (lambda: protocols.check("tile_stream"), "protocol"),
])
def test_the_checker_refuses_what_it_cannot_check(call, param):
    refused(call, param)


def test_the_seeded_bug_is_still_found_with_a_depth():
    """Refusing depth 0 must not lose the verdict: the book's overwrite-before-release bug, at any real depth."""
    assert not protocols.check(models.tile_stream(2, "none")).ok
    assert protocols.check(models.tile_stream(2, "mbarrier")).ok


@pytest.mark.parametrize("call, param", [
    (lambda: models.tile_stream(2, tiles=HUGE), "tiles"),
    (lambda: models.ping_pong(2, HUGE), "rounds"),
    (lambda: models.tma_ring(tiles=HUGE), "tiles"),
    (lambda: models.hopper_matmul(tiles=HUGE), "tiles"),
    (lambda: models.clc_matmul(tiles=HUGE), "tiles"),          # once a MemoryError: a tuple of that size
])
def test_protocol_builders_refuse_huge_sizes_at_once(call, param):
    t0 = time.perf_counter()
    refused(call, param)
    assert time.perf_counter() - t0 < 10


# ------------------------------------------------------------------------------- silent wrong answers
@pytest.mark.parametrize("kw, param", [({"programs": -1}, "programs"), ({"programs": 0}, "programs"),
                                       ({"group_m": 0}, "group_m"), ({"bm": 0}, "bm"), ({"bk": 3}, "bk")])
def test_persistent_matmul_refuses_what_gave_garbage(kw, param):
    a = torch.randn(64, 64)
    refused(lambda: foundations.persistent_matmul(a, a, **kw), param)


def test_ownership_refuses_warps_of_other_than_32_lanes():
    from triton.experimental.gluon import language as gl
    refused(lambda: layouts.ownership(gl.BlockedLayout([1, 1], [2, 8], [1, 1], [1, 0]), [4, 8]), "threads_per_warp")
    refused(lambda: layouts.ownership(gl.BlockedLayout([1, 1], [8, 8], [1, 1], [1, 0]), [8, 8]), "threads_per_warp")
    own = layouts.ownership(gl.BlockedLayout([1, 1], [4, 8], [2, 1], [1, 0]), [8, 8])      # 32 lanes: as before
    assert own.lane.max() == 31 and own.warp.max() == 1


@pytest.mark.parametrize("bases, shape", [([[0, 0], [1, 0]], [4, 32]),      # a broadcast basis
                                          ([[1, 0], [2, 0]], [2, 32])])     # a tensor smaller than the tiling
def test_num_ctas_is_the_layouts_not_the_largest_owner(bases, shape):
    from triton.experimental.gluon import language as gl
    own = layouts.ownership(gl.BlockedLayout([1, 1], [1, 32], [1, 1], [1, 0], cga_layout=bases), shape)
    assert own.num_ctas == 4            # what Triton's own view prints (B0..B3), whatever the first owners are


def test_census_refuses_a_string_for_patterns():
    ptx = sweep._PTX
    refused(lambda: lens.census(ptx, "ld.global"), "patterns")
    assert lens.census(ptx, ["ld.global"]) == {"ld.global": 1}


@pytest.mark.parametrize("call, param", [
    (lambda: multicast.tile_of([(1, 0)], 5), "cta"),
    (lambda: multicast.tile_of([(1, 0)], -1), "cta"),
    (lambda: multicast.multicast_mask([(1, 0)], 5, 2), "cta"),
    (lambda: multicast.multicast_mask([(1, 0)], 0, 4), "bases"),
    (lambda: multicast.receivers([(1, 0)], HUGE), "num_ctas"),
    (lambda: multicast.receivers([(1, 0)], 3), "num_ctas"),
    (lambda: barriers.broadcast_targets(0, 3), "num_ctas"),
    (lambda: barriers.broadcast_targets(4, 4), "from_cta"),
])
def test_ctas_out_of_range_are_refused(call, param):
    refused(call, param)


def test_ctas_in_range_answer_as_before():
    assert multicast.tile_of([(1, 0)], 1) == (1, 0)
    assert multicast.multicast_mask([(1, 0), (0, 0)], 0, 4) == 0b0101
    assert multicast.receivers([(1, 0)], 2) == {(0, 0): [0], (1, 0): [1]}


def test_softmax_spec_refuses_n_zero_instead_of_16384():
    refused(lambda: softmax.softmax_spec(N=0), "N")
    refused(lambda: softmax.softmax_spec(num_warps=0), "num_warps")
    assert softmax.softmax_spec(N=1024).constexprs["BLOCK_N"] == 1024


def test_stacked_along_m_refuses_three_ctas():
    refused(lambda: operands.stacked_along_m(3), "num_ctas")
    assert operands.stacked_along_m(4) == [(1, 0), (2, 0)]


def test_the_lens_refuses_a_kernel_that_needs_more_shared_memory_than_a_cta_has():
    with pytest.raises(lens.LensCompileError, match=r"KiB of shared memory per CTA, more than the 227 KiB") as info:
        lens.compile(primer.tma_ring_spec(stages=64))           # 64 stages of 8 KiB: 520 KiB
    assert "\n" not in str(info.value)


# ------------------------------------------------------------------------------------------------- hangs
@pytest.mark.parametrize("call, param", [
    (lambda: tile_order.row_major(HUGE, 2), "m_tiles"), (lambda: tile_order.grouped(2, HUGE, 4), "n_tiles"),
    (lambda: tile_order.planar_snake(HUGE, HUGE), "m_tiles"), (lambda: tile_order.is_bijection([], HUGE, 1), "m_tiles"),
    (lambda: tile_order.grouped(4096, 4096, 4), "m_tiles x n_tiles"),
    (lambda: traces.partition_map(HUGE), "num_warps"), (lambda: traces.partition_map(4, [HUGE]), "worker_warps"),
])
def test_what_could_hang_is_refused_at_once(call, param):
    t0 = time.perf_counter()
    refused(call, param)
    assert time.perf_counter() - t0 < 5


def test_isolated_has_a_time_limit_by_default_and_keeps_it():
    import inspect
    assert inspect.signature(isolation.isolated).parameters["timeout"].default == isolation.TIMEOUT > 0
    t0 = time.perf_counter()
    with pytest.raises(isolation.IsolatedTimeout, match="within 1 s"):
        isolation.isolated(time.sleep, 60, timeout=1)
    assert time.perf_counter() - t0 < 30
    assert isolation.isolated(sum, [1, 2]) == 3
    refused(lambda: isolation.isolated(sum, [1], timeout=0), "timeout")


# ------------------------------------------- arguments that reached Triton: refused before any hardware check
@pytest.mark.parametrize("call, param", [
    (lambda: softmax.online_softmax(torch.randn(4, 64), chunk=3), "chunk"),
    (lambda: multicast.hopper_multicast_matmul(torch.randn(128, 128).half(), torch.randn(128, 128).half(), stages=0),
     "stages"),
    (lambda: multicast.tile_stream(2, multicast=True, tiles=0), "tiles"),
    (lambda: ch5.clc_matmul(torch.randn(256, 256).half(), torch.randn(256, 256).half(), stages=0), "stages"),
    (lambda: ch5.clc_matmul(torch.randn(256, 256).half(), torch.randn(256, 256).half(), acc_stages=0), "acc_stages"),
    (lambda: ch5.clc_matmul(torch.randn(256, 256).half(), torch.randn(256, 256).half(), tile_width=2.5), "tile_width"),
    (lambda: ch6.hopper_matmul(torch.randn(256, 256).half(), torch.randn(256, 256).half(), warp_specialize="no"),
     "warp_specialize"),
    (lambda: two_cta.mma_tile(torch.randn(256, 64).half(), torch.randn(64, 128).half(), two_ctas="yes"), "two_ctas"),
    (lambda: softmax.upstream_design(torch.randn(4, 1024), torch.empty(4, 1024), num_ctas=3, num_warps=4), "num_ctas"),
    (lambda: softmax.upstream_design(torch.randn(4, 1024).half(), torch.empty(4, 1024), 1, 1), "out"),
])
def test_arguments_are_refused_before_the_hardware(call, param):
    from multicta_kernels.core import hardware
    refused(call, param)                                     # on this machine (a CPU: the hardware check would
    with hardware.pretend((9, 0)):                           # answer first if the argument were not checked) ...
        refused(call, param)
    with hardware.pretend((10, 0)):                          # ... and where the kernel's GPU is pretended
        refused(call, param)


def test_hardware_errors_do_not_promise_the_interpreter_for_gluon():
    from multicta_kernels.core import hardware
    if hardware.device().capability is not None:
        pytest.skip("a GPU is present")
    with pytest.raises(UnsupportedHardwareError) as info:
        softmax.online_softmax(torch.randn(4, 1024))
    assert "interpreter instead" not in str(info.value) and "lens" in str(info.value)


@pytest.mark.parametrize("name", ["check_scale", "check_softmax", "check_mma_tile", "check_hopper_matmul"])
def test_self_tests_say_what_they_need_on_a_cpu(name):
    from multicta_kernels.cli import selftests
    from multicta_kernels.core import hardware
    if hardware.device().capability is not None:
        pytest.skip("a GPU is present")
    with pytest.raises(UnsupportedHardwareError, match="self-test needs"):
        getattr(selftests, name)()


def test_the_hopper_benchmark_command_is_one_line_without_a_gpu():
    import subprocess
    from multicta_kernels.core import hardware
    if hardware.device().capability is not None:
        pytest.skip("a GPU is present")
    p = subprocess.run([sys.executable, "-m", "multicta_kernels.benchmarks.hopper_matmul"], capture_output=True,
                       text=True, cwd=ROOT, timeout=300)
    lines = [ln for ln in p.stderr.splitlines() if ln.strip() and "nanobind" not in ln and "leak" not in ln
             and not ln.startswith(" - ")]
    assert p.returncode != 0 and len(lines) == 1 and "needs warpgroup_mma" in lines[0], p.stderr


# ------------------------------------------------------------------------------------ the helpers themselves
def test_validate_helpers_name_the_parameter_in_one_line():
    for call, param in [(lambda: validate.count(0, "tiles"), "tiles"), (lambda: validate.count(True, "tiles"), "tiles"),
                        (lambda: validate.power_of_two(3, "bk", 16, 256), "bk"),
                        (lambda: validate.index(4, "cta", 4), "cta"), (lambda: validate.boolean("no", "flag"), "flag"),
                        (lambda: validate.one_of(1, "release", ("cluster",)), "release"),
                        (lambda: validate.finite(float("nan"), "alpha"), "alpha"),
                        (lambda: validate.bases([(1, 0)], "bases", 4), "bases"),
                        (lambda: validate.dtype("float64"), "dtype"),
                        (lambda: validate.names(["x"], "names", ["y"]), "names")]:
        refused(call, param)
    assert validate.count(3, "n") == 3 and validate.bases([[1, 0]], "b", 2) == ((1, 0),)


# ---------------------------------------------------------------------------------------------- the sweep
RECORD = ROOT / "results" / "bad_input_sweep.json"
SAMPLE = 360          # about 2 minutes on 2 cores


def test_the_call_list_is_generated_from_the_package():
    calls, skipped = sweep.calls()
    fns = {c["fn"] for c in calls}
    assert len(fns) > 150 and len(calls) > 1500
    assert {"multicta_kernels.protocols.explorer.check", "multicta_kernels.gluon.tile_order.grouped",
            "multicta_kernels.multicast.receivers", "multicta_kernels.softmax.softmax_spec"} <= fns
    assert all(reason for _, reason in skipped)


def test_the_recorded_full_sweep_has_no_hang_and_no_abort():
    r = json.loads(RECORD.read_text())
    counts = r["method"]["counts"]
    assert r["method"]["calls"] == r["method"]["of_calls"] == len(r["rows"]) > 1500
    assert counts.get("hang", 0) == 0 and counts.get("abort", 0) == 0, counts
    assert r["commit"] and r["triton"] == "3.9.0"


def test_a_sample_of_the_sweep_in_child_processes():
    """0 hangs, 0 aborts, and no call the recorded full run saw refused well is now anything else."""
    calls, _ = sweep.calls()
    done = sweep.run(sweep.sample(calls, SAMPLE), jobs=2, limit=60, log=None)
    counts = sweep.summary(done)
    hangs = [(d["fn"], d["param"], d["value"]) for d in done if d["outcome"] in ("hang", "abort")]
    assert not hangs, f"{counts}: {hangs}"
    recorded = {(row[0], row[1], row[3]): row[4] for row in json.loads(RECORD.read_text())["rows"]}
    worse = [(d["fn"], d["param"], d["value"], d["outcome"], d["message"][:120]) for d in done
             if recorded.get((d["fn"], d["param"], d["value"])) == "refused" and d["outcome"] != "refused"]
    assert worse == [], worse


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_the_upstream_design_is_the_baseline_of_every_dtype(dtype):
    """The benchmarks time the upstream design in fp32, fp16 and bf16: its wrapper lets each through to the
    hardware check (here a CPU's "needs a GPU"), with ``out`` of x's dtype."""
    from multicta_kernels.core.hardware import UnsupportedHardwareError
    x = torch.randn(4, 1024).to(getattr(torch, dtype))
    with pytest.raises(UnsupportedHardwareError):
        softmax.upstream_design(x, torch.empty_like(x), 1, 1)
