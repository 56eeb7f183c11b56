"""The Blackwell dry run (multicta_kernels.core.dryrun) on the CPU: a launch is bound and specialised as Triton's
launcher does it, compiled for sm_100a, checked as the driver would check it, recorded and stopped; the
comparisons are skipped and counted; the occupancy calculator is replaced by a bound that says so; the
doctor's CLC check reaches the persistent path; `pytest --blackwell-dry-run` and `doctor --dry-run` walk
what a B200 would run. On a GPU, compile_only() compiles and launches nothing."""
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from multicta_kernels import clc_matmul as cm
from multicta_kernels import two_cta
from multicta_kernels.cli import doctor, selftests
from multicta_kernels.core import dryrun, hardware
from multicta_kernels.core.accuracy import assert_equal, assert_matmul_close, expect, poisoned
from multicta_kernels.core.dryrun import DryRunError

ROOT = Path(__file__).resolve().parents[1]
H = torch.float16


def test_a_launch_is_specialised_compiled_for_sm_100a_recorded_and_stopped():
    """As Triton's launcher would: M = 1 becomes a constant, the grid counts clusters; nothing is written."""
    a, b = torch.randn(1, 64, dtype=H), torch.randn(64, 776, dtype=H)
    with dryrun.dry_run() as s:
        assert hardware.device().name == "NVIDIA B200" and hardware.device().sms == 148
        c = cm.clc_matmul(a, b, out=poisoned((1, 776), H))
        two_cta.mma_tile(torch.randn(256, 64, dtype=H), torch.randn(64, 128, dtype=H))
    first, second = s.launches
    assert (first.kernel, first.grid, first.num_ctas, first.target, first.launched) == \
        ("clc_matmul_kernel", (4,), 2, "sm_100a", True)
    assert first.signature["M"] == "constexpr" and first.signature["N"] == "i32"
    assert first.num_warps == 8 and first.tmem == 512 and first.shared > 200 * 1024   # 4 partitions' warps
    assert (second.kernel, second.grid, second.num_ctas) == ("two_cta_mma_kernel", (1,), 2)
    assert torch.isnan(c).all()                                      # stopped: nothing ran
    assert "2 launches stopped after compiling for sm_100a" in s.summary()
    assert not hardware.device().pretended and dryrun.active() is None


def test_comparisons_are_skipped_and_counted_only_inside():
    nan = poisoned((4, 4), torch.float32, device="cpu")
    one = torch.ones(4, 4)
    with dryrun.dry_run() as s:
        assert_matmul_close(nan, one, one, "m")
        assert_equal(nan, one, "e")
        expect(False, "x")
    assert s.skipped == ["m", "e", "x"] and "3 comparisons skipped (nothing ran)" in s.summary()
    with pytest.raises(AssertionError, match="never written"):
        assert_matmul_close(nan, one, one, "m")
    with pytest.raises(AssertionError, match="x"):
        expect(False, "x")


def test_what_loading_the_kernel_would_refuse_is_refused(monkeypatch):
    """Shared memory over a CTA's limit: Triton's loader would raise OutOfResources on the GPU."""
    monkeypatch.setattr(hardware, "SMEM_PER_CTA", 16 * 1024)
    with dryrun.dry_run():
        with pytest.raises(DryRunError, match="needs 32792 bytes of shared memory per CTA; a CTA may have 16384"):
            two_cta.mma_tile(torch.randn(128, 64, dtype=H), torch.randn(64, 128, dtype=H), two_ctas=False)


def test_a_grid_with_a_zero_dimension_is_refused():
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
    lay = two_cta.tile_layouts(128, 128, 64, False)
    a, b, c = torch.randn(128, 64, dtype=H), torch.randn(64, 128, dtype=H), torch.empty(128, 128, dtype=H)
    args = (TensorDescriptor.from_tensor(a, [128, 64], lay["a"]), TensorDescriptor.from_tensor(b, [64, 128], lay["b"]),
            TensorDescriptor.from_tensor(c, [128, 128], lay["c"]), lay["acc"])
    with dryrun.dry_run():
        with pytest.raises(DryRunError, match="zero dimension: Triton launches nothing"):
            two_cta.one_cta_mma_kernel[(0,)](*args, num_warps=4, num_ctas=1)


def test_descriptors_are_checked_against_cuTensorMapEncodeTiled():
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor
    lay = two_cta.tile_layouts(128, 128, 64, False)
    desc = TensorDescriptor.from_tensor(torch.randn(128, 64, dtype=H), [128, 64], lay["a"])
    good = {"swizzle": 3, "elem_size": 2, "block_size": [128, 64]}
    dryrun.check_descriptor(desc, good, "a")
    for meta, msg in (({**good, "block_size": [512, 64]}, "from 1 to 256"),
                      ({**good, "block_size": [128, 4]}, "8 bytes, not a multiple of 16"),
                      ({**good, "swizzle": 2}, "128 bytes, more than its 64-byte swizzle")):
        with pytest.raises(DryRunError, match=msg):
            dryrun.check_descriptor(desc, meta, "a")


def test_register_file():
    assert dryrun._per_cta_registers(255, 8) == 65536              # the CLC kernel: exactly an SM's registers
    assert dryrun._per_cta_registers(250, 9) > dryrun.REGISTERS_PER_SM


def test_max_clusters_is_a_bound_in_a_dry_run_and_says_so():
    from multicta_kernels.core.occupancy import max_clusters
    a, b = torch.randn(1000, 328, dtype=H), torch.randn(328, 776, dtype=H)
    with dryrun.dry_run() as s:
        for layout, resident in ((((1, 0),), 74), (((1, 0), (2, 0)), 37)):       # 148 SMs, one CTA per SM
            compiled = cm.prepare(a, b, cga_layout=layout).compile()
            assert max_clusters(compiled, 1 << len(layout)) == resident
        # one_cta_mma_kernel: 32 KiB, 4 warps, 135 registers: its registers let 3 CTAs share an SM
        two_cta.mma_tile(torch.randn(128, 64, dtype=H), torch.randn(64, 128, dtype=H), two_ctas=False)
        k = s.launches[-1].binary
        assert s.launches[-1].kernel == "one_cta_mma_kernel" and dryrun.registers(k) == 135 and dryrun.resident_bound(k, 1, 148) == 3 * 148   # > SMs / num_ctas
    assert s.bounds[:2] == [("clc_matmul_kernel", 2, 74), ("clc_matmul_kernel", 4, 37)]
    assert "at most 74 (a bound, not the occupancy calculator)" in s.summary()
    assert [ln.launched for ln in s.launches] == [False, False, True]          # compile() launches nothing


def test_the_clc_check_reaches_the_persistent_path(monkeypatch):
    """Issue 23, defect 6: the doctor's CLC check launches grids several times the clusters resident at once
    (so try_cancel succeeds many times), and asserts it: without its persistent shapes it fails."""
    with dryrun.dry_run() as s:
        detail = selftests.check_clc_matmul()
    assert "272 clusters of 2 CTAs for 74 resident" in detail and "136 clusters of 4 CTAs for 37 resident" in detail
    assert max(ln.grid[0] for ln in s.launches if ln.num_ctas == 2 and ln.launched) == 272
    monkeypatch.setattr(selftests, "CLC_PERSISTENT", [])
    with dryrun.dry_run():
        with pytest.raises(AssertionError, match="does not reach the persistent path at 2 CTAs: its largest grid, 24 clusters, is under 3 x the 74"):
            selftests.check_clc_matmul()


def _run(*args):
    env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, env=env, timeout=600)


def test_pytest_walks_the_tcgen05_tests_and_says_what_each_compiled():
    run = _run("-m", "pytest", "-q", "-p", "no:cacheprovider", "--blackwell-dry-run", "tests/test_two_cta.py",
               "-k", "looped")
    lines = [ln for ln in run.stdout.splitlines() if ln.startswith("[dry run]")]
    assert run.returncode == 0, run.stdout[-2000:]
    assert len(lines) == 3 and all("blackwell_multicast_mma_kernel x1 (grid 1; 4 CTAs x 4 warps" in ln for ln in lines)
    assert "3 passed" in run.stdout and "deselected" in run.stdout


def test_doctor_walks_its_tcgen05_checks(capsys):
    assert doctor.main(["--dry-run", "--only", "mma_tile,softmax"]) == 0
    out = capsys.readouterr().out
    assert "NVIDIA B200 pretended (sm_100, 148 SMs)" in out and "not walked" in out and "softmax" in out
    line = next(ln for ln in out.splitlines() if ln.startswith("[doctor] ch4 mma_tile"))
    assert " DRY " in line and "one_cta_mma_kernel x1" in line and "two_cta_mma_kernel x1" in line
    assert "2 comparisons skipped" in line and "1 of 1 checks reached their launches" in out


@pytest.mark.clusters
def test_compile_only_compiles_and_loads_but_launches_nothing():
    """On a GPU (the doctor's compile phase): the kernel is compiled and loaded, not launched; the launch
    after it finds it in Triton's cache."""
    from multicta_kernels import multicast as mc
    x = torch.randn(64, 64, device="cuda", dtype=H)
    with dryrun.compile_only() as s:
        bad, out = mc.multicast_copy(x, 2)
    torch.cuda.synchronize()
    assert bad.tolist() == [-1, -1] and torch.isnan(out).all()          # the wrapper's initial values: not launched
    assert [ln.kernel for ln in s.launches] == ["multicast_copy_kernel"]
    cache = mc.multicast_copy_kernel.device_caches[torch.cuda.current_device()][0]
    before = dict(cache)
    bad, out = mc.multicast_copy(x, 2)
    assert bad.tolist() == [0, 0] and torch.equal(out, x) and dict(cache) == before
