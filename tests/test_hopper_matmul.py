"""Chapter 6 groundwork: the Hopper multicast matmul. CPU: compiles, validation. Hopper-marked:
correctness against torch.matmul with edge tiles in M, N and K, output poisoned first. (Not yet
run on a GPU when written: these are the first tests to run on an H200.)"""
import dataclasses

import pytest
import torch

from multicta_kernels import bench
from multicta_kernels import hopper_matmul as hm
from multicta_kernels import lens


@pytest.mark.parametrize("cfg", [{}, {"num_ctas": 4}, {"num_ctas": 1}, {"block_m": 64, "block_n": 128, "stages": 4}])
def test_compiles_with_wgmma_and_multicast(cfg):
    k = lens.compile(hm.hopper_matmul_spec(**cfg), "sm_90a")
    assert all(k.census(k.spec.expect).values())
    assert k.census(["ld.local"])["ld.local"] == 0


@pytest.mark.parametrize("cfg, msg", [({"num_ctas": 8}, "1, 2 or 4"), ({"block_m": 256}, "64 or 128"),
                                      ({"block_n": 512}, "up to 256"), ({"stages": 5}, "shared memory"),
                                      ({"block_k": 128}, "32 or 64")])
def test_plan_messages(cfg, msg):
    with pytest.raises(ValueError, match=msg):
        hm.hopper_matmul_spec(**cfg)


def test_wrapper_messages():
    a = torch.randn(64, 64, dtype=torch.float16)
    with pytest.raises(TypeError, match="unknown options"):
        hm.hopper_matmul(a, a, tiles=2)
    with pytest.raises(ValueError, match="multiples of 8"):
        hm.hopper_matmul(torch.randn(64, 60, dtype=torch.float16), torch.randn(60, 64, dtype=torch.float16))


@pytest.mark.hopper
@pytest.mark.parametrize("num_ctas", [1, 2, 4])
@pytest.mark.parametrize("M, N, K, dtype", [(512, 512, 256, torch.float16), (1000, 776, 328, torch.float16),
                                            (3000, 2056, 1000, torch.bfloat16), (128, 256, 64, torch.float16)])
def test_matches_torch(num_ctas, M, N, K, dtype):
    a = torch.randn(M, K, device="cuda").to(dtype)
    b = torch.randn(K, N, device="cuda").to(dtype)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=dtype)
    hm.hopper_matmul(a, b, out=c, num_ctas=num_ctas)
    ref = a.float() @ b.float()
    assert not torch.isnan(c).any()
    assert bench.rel_err(c, ref) < 1e-2


@pytest.mark.hopper
def test_persistence_with_few_programs():
    a = torch.randn(1024, 512, device="cuda", dtype=torch.float16)
    b = torch.randn(512, 1024, device="cuda", dtype=torch.float16)
    c = hm.hopper_matmul(a, b, programs=3)        # each cluster walks many tiles
    ref = a.float() @ b.float()
    assert bench.rel_err(c, ref) < 1e-2
