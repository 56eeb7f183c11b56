"""The Gluon primer's kernels on a Hopper or Blackwell GPU: every result element by element against
torch, into poisoned outputs, over shapes that are not multiples of a tile (edge tiles, a single row
or column, one tile, a count of 1 that Triton specialises), each dtype and ring depth, repeated so
that an ordering bug that shows only now and then has its chances. A TMA kernel that hangs ends its
test after 60 s (notebook.run_live) instead of the session."""
import pytest
import torch

from multicta_kernels import primer
from multicta_kernels.core.accuracy import assert_equal, poisoned
from multicta_kernels.show.notebook import run_live

pytestmark = pytest.mark.clusters

SHAPES = [(1, 1), (1, 8), (5, 3), (32, 32), (70, 33), (33, 1000), (256, 512), (1000, 77)]
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


@pytest.mark.parametrize("how", primer.HOW)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_transpose(how, dtype, shape):
    x = torch.randn(shape, device="cuda").to(dtype)
    out = poisoned(shape[::-1], dtype)
    y = primer.transpose(x, 2.0, how=how, out=out)             # times 2: exact in every dtype
    torch.cuda.synchronize()
    assert y is out
    assert_equal(y, 2 * x.T, f"transpose ({how}) {shape} {dtype}")


def test_transpose_of_a_strided_view():
    x = torch.randn(130, 300, device="cuda")[:, ::3]          # made contiguous by the wrapper
    assert_equal(primer.transpose(x, -1.5, how="shared"), -1.5 * x.T, "transpose of a strided view")


# shapes with 16-byte rows in every dtype: N a multiple of 8
TMA_SHAPES = [(1, 8), (64, 64), (100, 72), (65, 136), (300, 520), (1, 1024), (1000, 8)]


RINGS = pytest.mark.parametrize("wrapper", [primer.tma_scale, primer.ws_scale], ids=["ring", "ws"])


@RINGS
@pytest.mark.parametrize("stages", [1, 2, 3])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", TMA_SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_tma_rings(wrapper, stages, dtype, shape):
    for _ in range(3):                                   # fresh data each time: a stale tile shows
        x = torch.randn(shape, device="cuda").to(dtype)
        out = poisoned(shape, dtype)
        run_live(wrapper.__name__, lambda: wrapper(x, 2.0, stages=stages, out=out), 60)
        assert_equal(out, 2 * x, f"{wrapper.__name__} {shape} {dtype} stages={stages}")


@RINGS
def test_tma_rings_many_tiles(wrapper):
    """4096 tiles through a 2-slot ring: every slot's parity flips 2048 times."""
    x = torch.randn(4096, 4096, device="cuda", dtype=torch.float16)
    out = poisoned(x.shape, x.dtype)
    run_live(wrapper.__name__, lambda: wrapper(x, 2.0, out=out), 60)
    assert_equal(out, 2 * x, f"{wrapper.__name__} 4096x4096")


def test_tma_rings_with_a_scale_that_rounds():
    """alpha = 0.1 on fp16 data: the kernels compute in fp32 and round once, as torch does."""
    x = torch.randn(200, 136, device="cuda", dtype=torch.float16)
    for wrapper in (primer.tma_scale, primer.ws_scale):
        out = run_live(wrapper.__name__, lambda: wrapper(x, 0.1), 60)
        assert_equal(out, (x.float() * 0.1).half(), f"{wrapper.__name__} alpha=0.1")
