"""Cross-CTA synchronisation inside a kernel, as chapter 2 teaches it: the init fence before a barrier's first
use, this CTA's rank, and arrivals and waits at cluster scope (a data hand-off between CTAs)."""
from __future__ import annotations

from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia import hopper


@gluon.jit
def sync_inits():
    """After the inits of barriers that cross CTAs (a peer arrives on or multicasts
    into them), before their first use: a relaxed cluster barrier, which Triton 3.9
    completes with the init fence (``fence.mbarrier_init.release.cluster`` just before
    it: PTX ISA, "membar/fence"). Without it the compiler puts both at the barriers'
    first use, every iteration if that use is in a loop. One CTA: nobody waits."""
    if gl.num_ctas() > 1:
        hopper.cluster.barrier(relaxed=True)


@gluon.jit
def cluster_rank():
    """This CTA's rank in its cluster (``%cluster_ctarank``). Gluon has no such builtin on purpose (ownership is
    a layout's business); the kernels here need it only to address a peer's barrier and to say who waits."""
    return gl.inline_asm("mov.u32 $0, %cluster_ctarank;", "=r", [], gl.int32, is_pure=True)


@gluon.jit
def release_arrive(bar, cta, pred=True, n=1):
    """One arrival on ``bar`` in CTA ``cta`` that *releases at cluster scope* what this thread wrote or acquired
    before it: ``mbarrier.arrive.release.cluster.shared::cluster``, issued by thread 0 (with ``n`` > 1, threads
    0 to n-1 arrive on the barriers of CTAs ``cta`` to ``cta + n - 1``, one each), and only if ``pred``.

    A user's ``mbarrier.arrive`` is ``.release.cta`` (PTX's default scope): no thread of another CTA can acquire
    from it, since a release and an acquire synchronise only when each lies in the other's scope (PTX ISA,
    "Memory Consistency Model": morally strong operations; release and acquire patterns). To release other
    threads' writes too, put a CTA barrier (``gl.barrier()``) before it: the release is cumulative."""
    gl.inline_asm("""{
    .reg .pred p;
    .reg .b32 t, peer, remote;
    mov.u32 t, %tid.x;
    setp.lt.and.u32 p, t, $3, $2;
    add.u32 peer, $1, t;
    mapa.shared::cluster.u32 remote, $0, peer;
    @p mbarrier.arrive.release.cluster.shared::cluster.b64 _, [remote];
    }""", "r,r,b,r", [bar, gl.to_tensor(cta), gl.to_tensor(pred), gl.to_tensor(n)], is_pure=False)


@gluon.jit
def acquire_wait(bar, phase, pred=True):
    """Wait (every thread, if ``pred``) until the phase of parity ``phase`` of this CTA's ``bar`` completes,
    *acquiring at cluster scope* what its arrivals released: ``mbarrier.try_wait.parity.acquire.cluster``. A
    user's ``mbarrier.wait`` is ``.acquire.cta``: reads of a peer's data after it are not ordered. (Inline assembly
    receives a barrier as the address of its *logical origin*, CTA 0's copy: ``mapa`` to this CTA's own rank
    gives the address of its own, which a wait needs.)"""
    gl.inline_asm("""{
    .reg .pred done, mine;
    .reg .b32 me, local;
    setp.ne.b32 mine, $2, 0;
    @!mine bra skip;
    mov.u32 me, %cluster_ctarank;
    mapa.shared::cluster.u32 local, $0, me;
    spin:
    mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [local], $1;
    @!done bra spin;
    skip:
    }""", "r,r,r", [bar, gl.to_tensor(phase), gl.to_tensor(pred).to(gl.int32)], is_pure=False)


@gluon.jit
def cluster_fence():
    """``fence.acq_rel.cluster``: the previous edition's recipe put it around a user's (CTA-scoped) arrive and wait.
    It is not enough: fences order this thread's accesses, but the arrive and the wait still synchronise only at
    CTA scope. Kept for the cost benchmark (mode 5), where it shows what each fence costs."""
    gl.inline_asm_elementwise("fence.acq_rel.cluster;\nmov.u32 $0, 0;", "=r", [], dtype=gl.int32,
                              is_pure=False, pack=1)
