"""The stage ring of the TMA kernels and its cluster-wide release (chapter 3): a multicast stage may be
reloaded only when every CTA that receives it has finished reading it."""
from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia import hopper
from triton.experimental.gluon.language.nvidia.hopper import mbarrier

from ..core.hardware import log2
from ..core import validate


# How every CTA tells the issuing CTA that a multicast stage may be reloaded (chapter 3).
RELEASE_CLUSTER_BARRIER = 0   # a cluster barrier per stage: every thread of every CTA waits
RELEASE_GATHER = 1            # every CTA arrives on one barrier in CTA 0, which then releases everyone
RELEASE_NONE = 2              # nobody else writes my buffers (one CTA, or each CTA loads its own copy): my own


                              # wait already ordered my reads before my reload
RELEASE_RELAXED = 3           # a relaxed cluster barrier: it orders execution, not memory (PTX ISA, barrier.cluster:


                              # .relaxed drops the release and the acquire), so it is legal only where no thread reads
                              # the slot before the reload (the tile stream counts arrivals and reads no data)
RELEASES = {"cluster": RELEASE_CLUSTER_BARRIER, "mbarrier": RELEASE_GATHER, "none": RELEASE_NONE,
            "relaxed": RELEASE_RELAXED}


def release_mode(release: str, num_ctas: int, allowed=("cluster", "mbarrier")) -> int:
    """The RELEASE constant of a release named ``release`` (one of ``allowed``); a lone CTA needs none."""
    if release not in allowed:
        raise ValueError(f"release must be one of {sorted(allowed)}, got {release!r}")
    return RELEASE_NONE if num_ctas == 1 else RELEASES[release]


def group_barrier_layout(num_ctas: int):
    """One barrier for the whole cluster, living in CTA 0 (every basis zero: chapter 2)."""
    validate.cluster_size(num_ctas)
    return mbarrier.MBarrierLayout([[0]] * log2(num_ctas))


@gluon.jit
def stage_of(it, STAGES: gl.constexpr):
    """Step ``it`` of a ring of STAGES buffers: its slot, and the parity of the phase its barrier completes."""
    return it % STAGES, (it // STAGES) & 1


@gluon.jit
def release(slot, empty, go, phase, RELEASE: gl.constexpr):
    """Every CTA of the cluster must be done with ``slot`` before anyone reloads it (peers write into it)."""
    if RELEASE == 0:                                   # RELEASE_CLUSTER_BARRIER
        hopper.cluster.barrier()
    elif RELEASE == 3:                                 # RELEASE_RELAXED (no reads to order: the tile stream)
        hopper.cluster.barrier(relaxed=True)
    elif RELEASE == 1:                                 # RELEASE_GATHER
        mbarrier.arrive(empty.index(slot))             # lands on CTA 0 (group barrier)
        mbarrier.wait(empty.index(slot), phase)        # CTA 0: everyone released the slot
        mbarrier.arrive(go.index(slot), from_cta=0)    # CTA 0 tells every CTA
        mbarrier.wait(go.index(slot), phase)


@gluon.jit
def ring_barriers(STAGES: gl.constexpr, RELEASE: gl.constexpr, group_all: gl.constexpr):
    """``ready[s]``: stage s has landed in this CTA. With the gather release, ``empty[s]`` is one barrier in
    CTA 0 that every CTA arrives on, and ``go[s]`` each CTA's own barrier that CTA 0 releases."""
    ready = mbarrier.allocate_mbarrier(batch=STAGES)
    for s in gl.static_range(STAGES):
        mbarrier.init(ready.index(s), count=1)
    if RELEASE == 1:
        empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], group_all)
        go = mbarrier.allocate_mbarrier(batch=STAGES)
        for s in gl.static_range(STAGES):
            mbarrier.init(empty.index(s), count=1)
            mbarrier.init(go.index(s), count=1)
    else:                                   # not used by the other release modes
        empty = ready
        go = ready
    return ready, empty, go
