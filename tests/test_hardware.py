"""Capabilities, not tiers. On a CPU the tests pretend to be a Hopper or a Blackwell GPU
(hardware.pretend) and follow every wrapper up to its launch: a B200 must never compile a wgmma
kernel (it would end the process), and every Blackwell kernel must reach its launch."""
import contextlib

import pytest
import torch

from multicta_kernels.core import hardware
from multicta_kernels.core.hardware import CLUSTERS, CUDA, TCGEN05, UnsupportedHardwareError, WGMMA


@pytest.mark.parametrize("capability, has", [
    ((8, 0), {CUDA}), ((9, 0), {CUDA, CLUSTERS, WGMMA}), ((10, 0), {CUDA, CLUSTERS, TCGEN05}),
    ((10, 3), {CUDA, CLUSTERS, TCGEN05}), ((12, 0), {CUDA, CLUSTERS}), (None, set())])
def test_features_by_capability(capability, has):
    with hardware.pretend(capability) if capability else contextlib.nullcontext():
        dev = hardware.device()
        if capability is None and dev.capability is not None:
            pytest.skip("a real GPU is present")
        assert set(dev.features) == has
        for f in hardware.FEATURES:
            assert hardware.has(f) == (f in has)


def test_require_names_the_feature_and_the_gpus():
    with hardware.pretend((10, 0), "NVIDIA B200"):
        with pytest.raises(UnsupportedHardwareError, match=r"warpgroup_mma.*sm_90 only.*NVIDIA B200 \(sm_100\)"):
            hardware.require(WGMMA, "a wgmma kernel")
        assert hardware.require(TCGEN05, "a tcgen05 kernel").name == "NVIDIA B200"


def _launch_recorder(monkeypatch, kernels):
    calls = []
    for k in kernels:
        monkeypatch.setattr(k, "run", lambda *a, _name=k.fn.__name__, **kw: calls.append(_name))
        monkeypatch.setattr(k, "warmup", lambda *a, _name=k.fn.__name__, **kw: pytest.fail(f"warmup {_name}"))
    return calls


def test_on_blackwell_no_hopper_kernel_compiles_and_every_blackwell_kernel_launches(monkeypatch):
    from multicta_kernels import clc_matmul as cm
    from multicta_kernels import hopper_matmul as hm
    from multicta_kernels.benchmarks import hopper_matmul as hm_bench
    from multicta_kernels import multicast as mc
    from multicta_kernels import two_cta
    hopper_only = [hm.hopper_matmul_kernel, hm.pipelined_matmul_kernel, hm.mma_peak_kernel,
                   mc.hopper_multicast_matmul_kernel]
    for k in hopper_only:
        monkeypatch.setattr(k, "run", lambda *a, _k=k, **kw: pytest.fail(f"launched {_k.fn.__name__}"))
        monkeypatch.setattr(k, "warmup", lambda *a, _k=k, **kw: pytest.fail(f"compiled {_k.fn.__name__}"))
    calls = _launch_recorder(monkeypatch, [cm.clc_matmul_kernel, two_cta.one_cta_mma_kernel,
                                           two_cta.two_cta_mma_kernel, mc.blackwell_multicast_mma_kernel])
    h = torch.float16
    with hardware.pretend((10, 0), "NVIDIA B200"):
        a, b = torch.randn(1000, 328, dtype=h), torch.randn(328, 776, dtype=h)
        cm.clc_matmul(a, b)
        cm.clc_matmul(a, b, cga_layout=((1, 0), (2, 0)))
        two_cta.mma_tile(torch.randn(128, 64, dtype=h), torch.randn(64, 128, dtype=h), two_ctas=False)
        two_cta.mma_tile(torch.randn(256, 64, dtype=h), torch.randn(64, 128, dtype=h))
        two_cta.looped_mma(torch.randn(512, 128, dtype=h), torch.randn(128, 128, dtype=h))
        for call in (lambda: hm.hopper_matmul(a, b), lambda: hm.prepare(a, b, warp_specialize=False),
                     lambda: mc.hopper_multicast_matmul(torch.randn(256, 64, dtype=h), torch.randn(64, 128, dtype=h)),
                     hm_bench.mma_peak_tflops):
            with pytest.raises(UnsupportedHardwareError, match="sm_90 only"):
                call()
    assert calls == ["clc_matmul_kernel", "clc_matmul_kernel", "one_cta_mma_kernel", "two_cta_mma_kernel",
                     "blackwell_multicast_mma_kernel"]


def test_on_hopper_blackwell_kernels_are_refused_before_compiling(monkeypatch):
    from multicta_kernels import clc_matmul as cm
    from multicta_kernels import two_cta
    calls = _launch_recorder(monkeypatch, [cm.clc_matmul_kernel, two_cta.two_cta_mma_kernel])
    h = torch.float16
    with hardware.pretend((9, 0), "NVIDIA H200"):
        with pytest.raises(UnsupportedHardwareError, match="sm_100 family"):
            cm.clc_matmul(torch.randn(256, 64, dtype=h), torch.randn(64, 256, dtype=h))
        with pytest.raises(UnsupportedHardwareError, match="sm_100 family"):
            two_cta.mma_tile(torch.randn(256, 64, dtype=h), torch.randn(64, 128, dtype=h))
    assert calls == []


def test_notebook_banner_says_live_or_lens(capsys):
    from multicta_kernels.show import notebook
    with hardware.pretend((10, 0), "NVIDIA B200"):
        notebook.banner(CLUSTERS, WGMMA, TCGEN05)
    text = capsys.readouterr().out
    assert "clusters  live here" in text and "tcgen05   live here" in text
    assert "wgmma     lens only" in text and "sm_90 only" in text
    with hardware.pretend((9, 0), "NVIDIA H200"):
        notebook.banner(TCGEN05)
    text = capsys.readouterr().out
    assert "tcgen05   lens only" in text


def test_doctor_plans_by_capability():
    from multicta_kernels.cli import doctor, selftests
    for capability, never, always in (((10, 0), WGMMA, TCGEN05), ((9, 0), TCGEN05, WGMMA)):
        with hardware.pretend(capability) as dev:
            todo, skipped = doctor.plan(dev)
        assert {c.feature for c in todo} == {CUDA, CLUSTERS, always}
        assert {o.check.feature for o in skipped} == {never} and {o.status for o in skipped} == {"SKIP"}
        assert len(todo) + len(skipped) == len(selftests.CHECKS)


def test_require_or_exit_is_one_line_for_scripts():
    with hardware.pretend((9, 0), "NVIDIA H200"):
        assert hardware.require_or_exit("a Hopper tool", CLUSTERS, WGMMA).name == "NVIDIA H200"
        with pytest.raises(SystemExit) as e:
            hardware.require_or_exit("a Blackwell tool", CLUSTERS, TCGEN05)
    msg = str(e.value.code)
    assert msg.startswith("a Blackwell tool needs") and "sm_100" in msg and "\n" not in msg


def test_the_package_errors_render_as_one_line_in_a_notebook():
    """IPython calls _render_traceback_ instead of printing a traceback: one line, the class's own name."""
    from multicta_kernels.core.isolation import TritonAborted
    from multicta_kernels.lens import LensCompileError
    from multicta_kernels.show.notebook import KernelTimeout
    errors = [hardware.UnsupportedHardwareError("needs clusters"), TritonAborted("LLVM ERROR: bad basis"),
              LensCompileError("no such layout", "softmax", "sm_90a"), KernelTimeout("ran past 60 s")]
    for e in errors:
        assert isinstance(e, RuntimeError)
        assert e._render_traceback_() == [f"{type(e).__name__}: {e}"]
    assert errors[2]._render_traceback_() == ["LensCompileError: softmax does not compile for sm_90a: no such layout"]


def test_a_wgmma_kernel_compiled_for_blackwell_ends_the_process_that_compiles_it():
    """Why the capabilities keep wgmma kernels away from sm_100 (README, setup): Triton 3.9 does not refuse
    such a compile, LLVM aborts. Here it runs in a forked child, which dies; the lens refuses it up front."""
    from multicta_kernels import hopper_matmul as hm, lens
    from multicta_kernels.core import isolation
    from multicta_kernels.lens import compiler
    from multicta_kernels.core.isolation import TritonAborted
    with pytest.raises(TritonAborted, match="Cannot select: intrinsic %llvm.nvvm.wgmma"):
        isolation.isolated(compiler._compile_here, hm.hopper_matmul_spec(), "sm_100a")
    with pytest.raises(ValueError, match="written for sm_90a only"):
        lens.compile(hm.hopper_matmul_spec(), "sm_100a")
