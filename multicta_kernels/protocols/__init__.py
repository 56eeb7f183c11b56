"""Check every kernel's mbarrier protocol on the CPU: every interleaving, a trace for every failure.

A GPU shows a wrong barrier count or phase only as a hang, or as tiles silently corrupted. This
module writes down, for each kernel of the book, what every partition of every CTA does to its
barriers and buffers, and explores the ways the hardware may interleave those steps. The answer is
"no deadlock, no phase overrun, no overwrite before release, no arrival after exit, in every
interleaving", or one of the shortest schedules that breaks it, as a trace in the style of chapter 2's
``barriers.trace_table``::

    from multicta_kernels import protocols
    r = protocols.check(protocols.models.ping_pong(num_ctas=2, one_phase=True))
    print(r)             # phase overrun after 20 steps: CTA 0 main's wait ...
    print(r.table())     # step, CTA, partition, op, detail

**The language.** A :class:`Protocol` declares barriers with their ``cga_layout`` (chapter 2's
rules: count x group size on the leader, every arrival lands on the leader, only the leader waits)
and one program per (CTA, partition), built with :class:`Thread`: ``arrive`` (also the ``from_cta``
broadcast), ``expect``, ``wait``, ``read`` / ``write`` of a buffer slot tagged with the version it
must hold (``over=``: the buffers whose bytes it shares), ``invalidate``, ``tma_load`` (its bytes
land later, in every receiver of a multicast), ``mma`` (reads its operands until it completes; then
each of its commits arrives, multicast to every CTA that fed it), ``try_cancel`` (a 16-byte CLC
answer landing in every CTA), ``tma_store`` / ``store_wait(n)``, ``wgmma`` / ``wgmma_wait(n)`` and
``cluster_barrier``. Loops are unrolled while building, with the kernel's own index and phase
arithmetic. Every wait and every arrival names the phase it is *meant* for. ``move`` and ``drop``
(like ``recount`` and ``rebroadcast``) make the model of a kernel with one line moved or removed.

**The semantics** are PTX's: a wait on parity ``p`` returns iff the barrier's count of completed
phases has the other parity, so a wait can only tell two consecutive phases apart. The checker
reports a **phase overrun** when a wait returns on an older phase, when a barrier runs past a phase
a waiter still expects, or when an arrival lands in a phase it was not meant for; an **overwrite
before release** when a write (a TMA, an MMA, a store into a staging buffer) starts while a reader
of the previous version has not released it; a **read before write** when a read finds an older
version; an **arrival after exit** when an arrival, a TMA landing, a commit or a CLC answer reaches
a CTA that may have exited (Triton ends the book's multi-CTA kernels with a cluster barrier, so a CTA may exit
once every thread of the cluster is done: that barrier orders threads, not asynchronous arrivals
still in flight), or a TMA store still reads its shared memory then; an **arrival after
invalidate** on a barrier whose memory may be reused; and a **deadlock** when every unfinished
thread is blocked.

**Asynchronous landings are per receiver.** A multicast TMA load and a CLC answer land in each
receiving CTA on its own, in any order (one receiver may see it later than another); an MMA
completes (its reads end, its accumulator is written), and then each of its commits arrives on
each CTA on its own: every ``tcgen05.commit`` is an arrival of its own, though one thread's
commits reach one barrier in issue order. Commits counted on one barrier are interchangeable, so a
commit may complete the phase next to its own there (see :meth:`Model._bar`).

**The explorer** is a breadth-first search over states (program counters; each barrier's pending
arrivals, pending bytes and completed phases; each buffer's version; the asynchronous operations in
flight) with a visited set, so the first failure found is one of the shortest. Partial-order
reduction (stubborn sets: steps on different barriers, phases or buffer versions are explored in one
order only) keeps most protocols to thousands of states; :func:`simulate` runs random schedules
where even that is too big. :func:`compare` ties each model to its kernel: the code sites of every
barrier operation, and every init count, equal what the compiled PTX contains.

What the model leaves out: a thread's MMAs complete in issue order, and so do its TMA stores (what
``tcgen05_commit`` and ``store_wait`` rely on); a thread's own arrivals (``mbarrier.arrive``, also on
a peer CTA) take effect when the thread runs them (the exit cluster barrier orders those before any
CTA exits); memory ordering is not modelled (a wait that returns makes visible what its arrivals
published: the kernels add the cluster-scope fences 3.9 needs for that).

**Where each part lives.** ``language`` (:class:`Protocol`, :class:`Thread`, :class:`Barrier`), ``semantics``
(:class:`Model`, the state machine), ``explorer`` (:func:`check`, :func:`simulate`, :class:`Result`),
``models`` (one builder per kernel of the book: ``protocols.models.ping_pong(...)``, named after the kernel it
models), ``agreement`` (:func:`compare` and :func:`allocation`: model and PTX agree) and ``cases`` (:data:`CASES`,
:func:`check_book`). The names most used are here at the top.
"""
from . import models, program
from .agreement import (CENSUS, allocation, compare, model_sequences, order, ptx_census, ptx_segments, sites,
                        store_wait_depths, try_waits)
from .cases import CASES, Case, check_book, kernel_models
from .explorer import Result, check, simulate, trace_rows
from .language import HEADER, INVALID, Barrier, Op, Protocol, Thread, all_ctas, commit_count, commit_targets
from .models import ALIASES, kernel_depths
from .semantics import Model, op_text

__all__ = ["models", "program", "CENSUS", "allocation", "compare", "model_sequences", "order", "ptx_census", "ptx_segments", "sites", "store_wait_depths", "try_waits", "CASES", "Case", "check_book",
           "kernel_models", "Result", "check", "simulate", "trace_rows", "HEADER", "INVALID", "Barrier", "Op", "Protocol",
           "Thread", "all_ctas", "commit_count", "commit_targets", "ALIASES", "kernel_depths", "Model", "op_text"]
