"""Chapter 5's CLC matmul: CPU checks of the kernel's helper, plan validation and refusal; on
Blackwell, correctness against torch.matmul including edge tiles, for each cga_layout."""
import types

import pytest
import torch

from multicta_kernels import bench
from multicta_kernels import clc_matmul as cm
from multicta_kernels import lens, tile_order
from multicta_kernels.hardware import BLACKWELL, UnsupportedHardwareError, tier


def test_kernel_snake_helper_matches_python():
    """Run the kernel helper's own source with Python stand-ins for gl.minimum and gl.where."""
    fn = cm.planar_snake.fn
    g = fn.__globals__
    saved = g["gl"]
    g["gl"] = types.SimpleNamespace(minimum=min, where=lambda c, a, b: a if c else b)
    try:
        for m in range(1, 10):
            for n in range(1, 10):
                for d in (0, 1):
                    for w in (1, 2, 3, 16):
                        assert [fn(l, m, n, d, w) for l in range(m * n)] == tile_order.planar_snake(m, n, d, w)
    finally:
        g["gl"] = saved


@pytest.mark.parametrize("cfg", [{}, {"cga_layout": ((1, 0), (2, 0))}, {"block_n": 128, "stages": 4},
                                 {"minor_dim": 1, "tile_width": 8}])
def test_configurations_compile_with_their_instructions(cfg):
    k = lens.compile(cm.clc_matmul_spec(**cfg), "sm_100a")
    assert all(k.census(k.spec.expect).values())
    assert k.census(["ld.local"])["ld.local"] == 0


@pytest.mark.parametrize("cfg, msg", [
    ({"cga_layout": ((0, 1),)}, "must start with \\(1, 0\\)"),
    ({"block_m": 96}, "64 or 128"),
    ({"block_n": 512}, "at most 256 columns"),
    ({"acc_stages": 3}, "512 columns"),
    ({"epilogue_n": 48}, "divide block_n"),
    ({"stages": 9}, "shared memory"),
])
def test_plan_messages(cfg, msg):
    with pytest.raises(ValueError, match=msg):
        cm.clc_matmul_spec(**cfg)


def test_wrapper_checks_before_hardware():
    a = torch.randn(256, 64, dtype=torch.float16)
    with pytest.raises(TypeError, match="unknown options"):
        cm.clc_matmul(a, a.T.contiguous(), tile=3)
    with pytest.raises(ValueError, match="multiples of 8"):
        cm.clc_matmul(torch.randn(64, 60, dtype=torch.float16), torch.randn(60, 64, dtype=torch.float16))


@pytest.mark.skipif(tier().at_least(BLACKWELL), reason="checks the refusal elsewhere")
def test_refused_off_blackwell_before_compiling(monkeypatch):
    monkeypatch.setattr(cm.clc_matmul_kernel, "run", lambda *a, **k: pytest.fail("launched"))
    with pytest.raises(UnsupportedHardwareError, match="Blackwell"):
        cm.clc_matmul(torch.randn(256, 64, dtype=torch.float16), torch.randn(64, 256, dtype=torch.float16))


def test_makespan_models():
    import random
    rng = random.Random(0)
    for _ in range(50):                       # greedy assignment is never worse than static by more than one tile
        d = [rng.choice([1.0, 1.0, 1.0, 3.0]) for _ in range(rng.randrange(10, 200))]
        w = rng.randrange(1, 17)
        assert cm.makespan(d, w, True) <= cm.makespan(d, w, False) + max(d) + 1e-9
    assert cm.makespan([1.0] * 8, 4, True) == cm.makespan([1.0] * 8, 4, False) == 2.0
    slow = [1.0] * 7 + [0.5]                  # one worker at half speed: static waits for it, dynamic doesn't
    assert cm.makespan([1.0] * 800, 8, False, slow) == 200.0
    assert cm.makespan([1.0] * 800, 8, True, slow) < 110.0
    with pytest.raises(ValueError, match="speeds"):
        cm.makespan([1.0], 2, True, [1.0])


@pytest.mark.blackwell
@pytest.mark.parametrize("cga", [((1, 0),), ((1, 0), (2, 0))])
@pytest.mark.parametrize("M, N, K, dtype", [(1024, 1024, 512, torch.float16), (1000, 776, 328, torch.float16),
                                            (3000, 2056, 1000, torch.bfloat16), (256, 256, 64, torch.float16)])
def test_matches_torch(cga, M, N, K, dtype):
    a = torch.randn(M, K, device="cuda").to(dtype)
    b = torch.randn(K, N, device="cuda").to(dtype)
    c = torch.full((M, N), float("nan"), device="cuda", dtype=dtype)
    cm.clc_matmul(a, b, out=c, cga_layout=cga)
    ref = a.float() @ b.float()
    assert not torch.isnan(c).any()
    assert bench.rel_err(c, ref) < 1e-2
