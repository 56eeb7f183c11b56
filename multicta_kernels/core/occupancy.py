"""How many clusters of a compiled kernel can be resident on the GPU at once (CUDA's occupancy calculator)."""
from __future__ import annotations

from . import dryrun
from .hardware import SMEM_PER_CTA


def max_clusters(compiled, num_ctas: int) -> int:
    """How many clusters of a compiled kernel can be resident at once (CUDA's occupancy calculator, with
    the kernel's real shared memory). A cluster must fit in one GPC, so this can be less than
    SMs / num_ctas (on the H200, 30 clusters of 4, not 33): a persistent grid larger than this runs its
    last clusters as a second wave. Triton 3.9's binding asks with 128 threads per CTA whatever the
    kernel's warps: exact for 4-warp CTAs and for kernels whose shared memory allows one CTA per SM (the
    matmuls); for others it can overestimate (see :func:`resident_clusters_known`). In a dry run (no GPU) it
    is :func:`multicta_kernels.core.dryrun.resident_bound`, an upper bound from the kernel's resources."""
    import triton
    if dryrun.active() is not None and dryrun.active().mode == "dry run":   # no GPU: an upper bound, said so
        return dryrun.bounded_max_clusters(compiled, num_ctas)
    return triton.runtime.driver.active.utils.cuOccupancyMaxActiveClusters(
        _loaded(compiled).function, compiled.metadata.shared, num_ctas)


def resident_clusters_known(num_warps: int, shared_bytes: int) -> bool:
    """Whether :func:`max_clusters` is exact for such a kernel (see its docstring)."""
    return num_warps == 4 or shared_bytes > SMEM_PER_CTA // 2


def _loaded(compiled):
    """A compiled kernel gets its CUfunction when first launched; the occupancy calculator needs it before.
    Triton 3.9 has no public call for that, so this is the one place that uses the private one."""
    compiled._init_handles()
    return compiled
