"""Model and kernel agree: every protocol built at a kernel's configuration has, per kind, as many
code sites as the compiled PTX has instructions (inits with their counts, arrives, expects, waits,
commits, try_cancels, TMA loads and stores, store waits, cluster barriers), so neither can drift."""
import re

import pytest

from multicta_kernels import catalog
from multicta_kernels import protocols as P

MODELS = P.kernel_models()


@pytest.mark.parametrize("protocol", MODELS, ids=lambda p: p.name)
def test_model_has_the_kernels_code_sites(protocol):
    rows = P.compare(protocol)
    assert all(ok for *_, ok in rows), "\n".join(f"{k:16s} model {m!s:40s} PTX {g}" for k, m, g, _ in rows)


def test_every_barrier_kernel_of_the_book_has_a_model():
    modelled = {p.kernel[0] for p in MODELS}
    assert modelled == {"cluster_exchange", "ping_pong", "pair_sum", "tile_stream", "blackwell_multicast_mma",
                        "one_cta_mma", "two_cta_mma", "clc_matmul", "hopper_matmul"}
    assert modelled <= set(catalog.registered())


def test_a_model_that_drifts_is_caught():
    before = P.clc_matmul(release="group", stages=6, subtiles=8, tiles=2)     # the kernel before the change
    ptx = catalog.compile("clc_matmul", "sm_100a").ptx
    wrong = {k for k, _, _, ok in P.compare(before, ptx) if not ok}
    assert {"init counts", "cluster_barrier"} <= wrong


@pytest.mark.parametrize("protocol", [p for p in MODELS if p.num_ctas > 1 and any(op.kind == "mma" for t in p.threads
                                                                                   for op in t.ops)],
                         ids=lambda p: p.name)
def test_commit_masks_are_the_ptx_masks(protocol):
    """The multicast mask of every tcgen05.commit (a 16-bit immediate) is the model's target set of
    the MMA that CTA 0 issues."""
    name, params, target = protocol.kernel
    lines = catalog.compile(name, target, **params).ptx.splitlines()
    masks = set()
    for i, line in enumerate(lines):
        m = re.search(r"tcgen05\.commit\S*multicast::cluster\.b64 \[[^\]]+\], (%rs\d+);", line)
        if m:
            movs = [re.search(rf"mov\.b16\s+{m.group(1)}, (\d+);", x) for x in lines[:i]]
            masks.add(int([x for x in movs if x][-1].group(1)))
    model = {sum(1 << c for c in {land[1] for land in op.lands})
             for t in protocol.threads if t.cta == 0 for op in t.ops if op.kind == "mma" and op.asynchronous}
    assert masks == model
