"""Chapter 4: the 2-CTA kernels compile for sm_100a with cta_group::2; the 1-CTA twin without;
validation; and, on Blackwell, correctness against torch.matmul."""
import re

import pytest
import torch

from multicta_kernels import catalog, lens, two_cta
from multicta_kernels.core import hardware
from multicta_kernels.core.accuracy import assert_matmul_close
from multicta_kernels.core.hardware import TCGEN05, UnsupportedHardwareError


def _tcgen05_sequence(ptx):
    """The tcgen05 operations in program order, their cta_group (and the commit's multicast) taken out."""
    return [re.sub(r"\.cta_group::[12]", "", op).replace(".multicast::cluster", "") for _, op, _ in lens.instructions(ptx)
            if op.startswith("tcgen05")]


def _commit_masks(ptx):
    lines = ptx.splitlines()
    out = []
    for i, line in enumerate(lines):
        if m := re.search(r"tcgen05\.commit\S*multicast::cluster\.b64 \[[^\]]+\], (%rs\d+);", line):
            movs = [x for x in (re.search(rf"mov\.b16\s+{m.group(1)}, (\d+);", ln) for ln in lines[:i]) if x]
            out.append(int(movs[-1].group(1)))
    return out


def twins_differences(two_ptx, one_ptx):
    """What is wrong with the twins, in words ([] if nothing): the same tcgen05 operations in the same order, every
    one of the pair's with cta_group::2 and every one of the single CTA's with cta_group::1, the pair's commit
    multicast to both CTAs (mask 0b11) and the 2-CTA cluster declared."""
    out = []
    if _tcgen05_sequence(two_ptx) != _tcgen05_sequence(one_ptx):
        out.append(f"tcgen05 sequences differ: {_tcgen05_sequence(two_ptx)} vs {_tcgen05_sequence(one_ptx)}")
    grouped = lambda ptx: [op for _, op, _ in lens.instructions(ptx) if op.startswith("tcgen05") and "cta_group" in op]
    if not grouped(two_ptx) or any("cta_group::2" not in op for op in grouped(two_ptx)):
        out.append("the pair kernel has a tcgen05 operation without cta_group::2")
    if not grouped(one_ptx) or any("cta_group::1" not in op for op in grouped(one_ptx)):
        out.append("the single-CTA kernel has a tcgen05 operation without cta_group::1")
    if _commit_masks(two_ptx) != [0b11] or _commit_masks(one_ptx):
        out.append(f"commit masks {_commit_masks(two_ptx)} (pair) {_commit_masks(one_ptx)} (single), want [3] and []")
    if ".reqnctapercluster 2" not in two_ptx or ".reqnctapercluster" in one_ptx:
        out.append("cluster sizes: want .reqnctapercluster 2 in the pair kernel only")
    return out


def test_twins_differ_exactly_in_cta_group():
    """A structural fact, not strings: the twins issue the same tcgen05 operations in the same order and differ in
    their cta_group, the pair's commit mask and the cluster size (issue 25: the old test only found strings)."""
    two = catalog.compile("two_cta_mma", "sm_100a")
    one = catalog.compile("one_cta_mma", "sm_100a")
    assert twins_differences(two.ptx, one.ptx) == []


def test_a_twin_that_drifts_is_caught(tmp_path):
    """The check above fails when the pair kernel issues its MMA twice (the single-CTA twin once)."""
    mma = "    tcgen05_mma(a_smem, b_smem, acc, use_acc=False, mbarriers=[done])\n"
    fn = lens.variant(two_cta.two_cta_mma_kernel, folder=tmp_path, edits={
        mma: mma.replace("mbarriers=[done])", "mbarriers=[done])\n    tcgen05_mma(a_smem, b_smem, acc, use_acc=True)")})
    two = lens.compile(lens.with_kernel(two_cta.two_cta_mma_spec(), fn), "sm_100a")
    one = catalog.compile("one_cta_mma", "sm_100a")
    assert any("sequences differ" in d for d in twins_differences(two.ptx, one.ptx))


def test_two_cta_kernels_are_blackwell_only():
    with pytest.raises(ValueError, match="written for sm_100a only"):
        catalog.compile("two_cta_mma", "sm_90a")


def test_intensity_numbers():
    one = two_cta.intensity(128, 128, 64, two_ctas=False)
    two = two_cta.intensity(256, 128, 64, two_ctas=True)
    assert one["flops_per_cta"] == two["flops_per_cta"] == 2 * 128 * 128 * 64
    assert one["smem_bytes_per_cta"] == 32768 and two["smem_bytes_per_cta"] == 24576


@pytest.mark.parametrize("a_shape, b_shape, dtype, two, exc, msg", [
    ((256, 64), (64, 128), torch.float32, True, TypeError, "float16 or both bfloat16"),
    ((256, 64), (32, 128), torch.float16, True, ValueError, "\\(M, K\\) @ \\(K, N\\)"),
    ((128, 64), (64, 128), torch.float16, True, ValueError, "M = 256"),
    ((256, 64), (64, 128), torch.float16, False, ValueError, "M = 128"),
    ((256, 64), (64, 300), torch.float16, True, ValueError, "N must be"),
    ((256, 64), (64, 48), torch.float16, True, ValueError, "N must be a power of two"),   # a multiple of 16
    ((256, 40), (40, 128), torch.float16, True, ValueError, "K must be"),
    ((256, 48), (48, 128), torch.float16, True, ValueError, "K must be a power of two"),  # a multiple of 16
    ("a transposed", (64, 128), torch.float16, True, ValueError, "stride"),
])
def test_tile_validation(a_shape, b_shape, dtype, two, exc, msg):
    """Bad arguments are reported as such on every machine, before the hardware is asked about."""
    a = torch.randn(64, 256).to(dtype).T if a_shape == "a transposed" else torch.randn(a_shape).to(dtype)
    with pytest.raises(exc, match=msg):
        two_cta.mma_tile(a, torch.randn(b_shape).to(dtype), two_ctas=two)


def test_barriers_are_invalidated_before_their_bytes_are_reused():
    """c_smem is allocated after the MMA: the allocator may give it the barriers' bytes (the whole
    kernel's shared memory is the size of c_smem alone), and PTX requires mbarrier.inval first."""
    for name in ("two_cta_mma", "one_cta_mma"):
        k = catalog.compile(name, "sm_100a")
        assert k.census(["mbarrier.inval"])["mbarrier.inval"] == 2, name
    k = catalog.compile("two_cta_mma", "sm_100a")
    assert k.shared_bytes == 128 * 128 * 2             # c_smem alone: A, B and the barriers share its bytes


def test_looped_validation():
    with pytest.raises(ValueError, match="512 x 128"):
        two_cta.looped_mma(torch.randn(256, 128, dtype=torch.float16), torch.randn(128, 128, dtype=torch.float16))


@pytest.mark.skipif(hardware.has(TCGEN05), reason="checks the refusal on other GPUs")
def test_other_gpus_are_refused_before_compiling(monkeypatch):
    from multicta_kernels import two_cta as m
    monkeypatch.setattr(m.two_cta_mma_kernel, "run", lambda *a, **k: pytest.fail("a kernel was launched"))
    a = torch.randn(256, 64, dtype=torch.float16)
    b = torch.randn(64, 128, dtype=torch.float16)
    for capability in ((9, 0), None):
        import contextlib
        with hardware.pretend(capability) if capability else contextlib.nullcontext():
            with pytest.raises(UnsupportedHardwareError, match="sm_100"):
                two_cta.mma_tile(a, b)
            with pytest.raises(UnsupportedHardwareError, match="sm_100"):
                two_cta.looped_mma(torch.randn(512, 128, dtype=torch.float16),
                                   torch.randn(128, 128, dtype=torch.float16))


@pytest.mark.tcgen05
@pytest.mark.parametrize("two", [True, False])
@pytest.mark.parametrize("N, K, dtype", [(128, 64, torch.float16), (256, 64, torch.float16), (64, 128, torch.bfloat16)])
def test_tile_matches_torch(two, N, K, dtype):
    M = 256 if two else 128
    a = torch.randn(M, K, device=hardware.tensor_device()).to(dtype)
    b = torch.randn(K, N, device=hardware.tensor_device()).to(dtype)
    c = two_cta.mma_tile(a, b, two_ctas=two)
    assert_matmul_close(c, a, b)


@pytest.mark.tcgen05
@pytest.mark.parametrize("K, dtype", [(128, torch.float16), (256, torch.bfloat16), (64, torch.float16)])
def test_looped_matches_torch(K, dtype):
    a = torch.randn(512, K, device=hardware.tensor_device()).to(dtype)
    b = torch.randn(K, 128, device=hardware.tensor_device()).to(dtype)
    c = two_cta.looped_mma(a, b)
    assert_matmul_close(c, a, b)


def _recorded_launches(monkeypatch, kernel):
    calls = []
    monkeypatch.setattr(kernel, "run", lambda *a, **kw: calls.append((a, kw)))
    return calls


def test_mma_tile_launches_the_kernel_it_is_given_into_out(monkeypatch):
    """kernel= and out=: chapter 4's "Change it and see" launches a reader's copy through the package's wrapper
    (its checks, layouts and descriptors), into a poisoned output of the reader's; the package's kernel is not run."""
    from multicta_kernels.core.accuracy import poisoned
    mine = lens.variant(two_cta.two_cta_mma_kernel, {"two_ctas=True)  ": "two_ctas=False)  "}, name="mine_two_cta")
    theirs, calls = _recorded_launches(monkeypatch, two_cta.two_cta_mma_kernel), _recorded_launches(monkeypatch, mine)
    a, b = torch.randn(256, 64, dtype=torch.float16), torch.randn(64, 128, dtype=torch.float16)
    with hardware.pretend((10, 0), "NVIDIA B200"):
        c = poisoned((256, 128), torch.float16)
        assert two_cta.mma_tile(a, b, out=c, kernel=mine) is c
    assert theirs == [] and len(calls) == 1 and calls[0][1]["grid"] == (1,) and calls[0][1]["num_ctas"] == 2
    assert calls[0][0][2].base is c                         # C's descriptor is over the given output


@pytest.mark.parametrize("kwargs, exc, msg", [
    (dict(kernel=lambda *a: None), TypeError, "@gluon.jit"),
    (dict(kernel="two_cta_mma_kernel"), TypeError, "@gluon.jit"),
    (dict(kernel=two_cta.commit_demo_kernel), ValueError, "two_cta_mma_kernel's parameters"),
    (dict(out=torch.empty(256, 64, dtype=torch.float16)), ValueError, r"out must be a \(256, 128\)"),
    (dict(out=torch.empty(256, 128, dtype=torch.float32)), ValueError, "out must be"),
])
def test_mma_tile_refuses_a_bad_kernel_or_out_before_the_hardware(kwargs, exc, msg, monkeypatch):
    _recorded_launches(monkeypatch, two_cta.two_cta_mma_kernel)
    a, b = torch.randn(256, 64, dtype=torch.float16), torch.randn(64, 128, dtype=torch.float16)
    for capability in (None, (9, 0)):
        import contextlib
        with hardware.pretend(capability) if capability else contextlib.nullcontext():
            with pytest.raises(exc, match=msg):
                two_cta.mma_tile(a, b, **kwargs)
