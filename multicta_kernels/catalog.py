"""The book's kernels by name, in book order: what the lens compiles, the tests check and the notebooks show.

Each entry is a spec factory of a chapter module (it returns a :class:`~multicta_kernels.lens.KernelSpec`)
and the parameter sets the tests compile for every target. The lens itself knows no chapter::

    from multicta_kernels import catalog
    k = catalog.compile("softmax", "sm_100a", num_ctas=4)     # cached
    k.census(["barrier.cluster.wait"])
"""
from __future__ import annotations

import functools

from . import barriers, clc_matmul, foundations, hopper_matmul, lens, multicast, primer, softmax, two_cta, wide_tiles
from .gluon.ring import RELEASE_CLUSTER_BARRIER, RELEASE_GATHER

KERNELS = {   # name: (spec factory, parameter sets the tests compile)
    # Part 0
    "tl_scale": (foundations.scale_spec, [{}]),
    "tl_hinted_copy": (foundations.hinted_copy_spec, [{"hint": True}, {"hint": False}]),
    "tl_asin": (foundations.asin_spec, [{}]),
    "tl_persistent_matmul": (foundations.persistent_matmul_spec, [{}]),
    "tl_fold": (foundations.fold_spec, [{"stages": None}, {"stages": 3}]),
    # the Gluon primer
    "primer_transpose": (primer.transpose_spec, [{"how": how} for how in primer.HOW]),
    "primer_tma_ring": (primer.tma_ring_spec, [{}, {"stages": 1}, {"stages": 3, "dtype": "float32"}]),
    "primer_ws_scale": (primer.ws_scale_spec, [{}, {"dtype": "bfloat16"}]),
    # chapter 1
    "softmax": (softmax.softmax_spec, [{"num_ctas": c} for c in (1, 2, 4, 8, 16)]),
    "softmax_two_pass": (softmax.softmax_two_pass_spec, [{"num_ctas": c} for c in (1, 4, 16)]),
    "softmax_one_round": (softmax.softmax_one_round_spec, [{"num_ctas": c} for c in (2, 4, 16)]
                          + [{"num_ctas": 4, "dtype": "bfloat16"}, {"num_ctas": 8, "N": 40000}]),
    "softmax_pipelined": (softmax.softmax_pipelined_spec, [{"num_ctas": c} for c in (2, 4, 16)]
                          + [{"num_ctas": 16, "N": 262144, "dtype": "bfloat16"}, {"num_ctas": 8, "N": 100000}]),
    "softmax_staged": (softmax.softmax_staged_spec, [{"num_ctas": c} for c in (2, 4, 16)]
                       + [{"num_ctas": 16, "N": 524288, "num_warps": 16}, {"num_ctas": 8, "N": 262144, "num_warps": 8,
                                                                           "dtype": "bfloat16"}]),
    "softmax_halves": (softmax.softmax_halves_spec, [{"num_ctas": c} for c in (2, 4, 16)]
                       + [{"num_ctas": 16, "num_warps": 16}]),
    "softmax_upstream_design": (softmax.upstream_design_spec, [{"num_ctas": 1, "N": 4096}, {}, {"num_ctas": 16,
                                                                                               "N": 262144}]),
    "online_softmax": (softmax.online_softmax_spec, [{}]),
    # chapter 2
    "cluster_exchange": (barriers.exchange_spec, [{"num_ctas": c} for c in (2, 4, 8, 16)]),
    "ping_pong": (barriers.ping_pong_spec, [{"num_ctas": c} for c in (2, 16)]),
    "pair_sum": (barriers.pair_sum_spec, [{}]),
    "barrier_cost": (barriers.barrier_cost_spec, [{"num_ctas": c, "mode": m} for c in (2, 16) for m in barriers.MODES]),
    # chapter 3
    "multicast_copy": (multicast.multicast_copy_spec,
                       [{"num_ctas": c, "multicast": m} for c in (2, 16) for m in (True, False)]),
    "tile_stream": (multicast.tile_stream_spec,
                    [{"num_ctas": 4, "multicast": m, "release": r} for m in (True, False)
                     for r in (RELEASE_CLUSTER_BARRIER, RELEASE_GATHER)]),
    "hopper_multicast_matmul": (multicast.hopper_multicast_matmul_spec,
                                [{"num_ctas": c, "release": r} for c in (2, 4)
                                 for r in (RELEASE_CLUSTER_BARRIER, RELEASE_GATHER)]),
    "blackwell_multicast_mma": (multicast.blackwell_multicast_mma_spec,
                                [{}, {"two_ctas": False, "acc_bases": ((1, 0),), "BM": 256}]),
    # chapter 4
    "two_cta_mma": (two_cta.two_cta_mma_spec, [{}, {"N": 256, "K": 64}, {"dtype": "bfloat16"}]),
    "one_cta_mma": (two_cta.one_cta_mma_spec, [{}, {"dtype": "bfloat16"}]),
    # chapter 5
    "clc_matmul": (clc_matmul.clc_matmul_spec, [{}, {"cga_layout": ((1, 0), (2, 0))}, {"dtype": "bfloat16"}]),
    # chapter 6
    "hopper_matmul": (hopper_matmul.hopper_matmul_spec,
                      [{}, {"num_ctas": 4}, {"num_ctas": 2}, {"dtype": "bfloat16"}, {"warp_specialize": False},
                       {"consumers": 2, "block_m": 64}, {"epilogue_n": 64, "stages": 4}]),
    "wide_matmul": (wide_tiles.wide_matmul_spec, [{}, {"extra": 16}, {"extra": 32}, {"dtype": "bfloat16"},
                                                  {"a_regs": True}]),
    "tall_matmul": (wide_tiles.tall_matmul_spec, [{}, {"dtype": "bfloat16"}, {"stages": 3}]),
}


def registered() -> dict[str, list[dict]]:
    """Every kernel's name with the parameter sets the tests compile."""
    return {name: list(examples) for name, (_, examples) in KERNELS.items()}


def spec(name: str, **params) -> lens.KernelSpec:
    if name not in KERNELS:
        raise KeyError(f"no kernel named {name!r} in the catalog; it has {sorted(KERNELS)}")
    return KERNELS[name][0](**params)


def compile(name: str, target: str = "sm_90a", **params) -> lens.Compiled:
    """``lens.compile(spec(name, **params), target)``, cached: notebooks and tests ask for the same ones."""
    return _compiled(name, target, tuple(sorted(params.items())))


@functools.lru_cache(maxsize=256)
def _compiled(name, target, params):
    return lens.compile(spec(name, **dict(params)), target)
