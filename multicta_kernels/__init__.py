"""Kernels and helpers for the book *Multi-CTA programming in Gluon*.

The chapters, in book order (their names are the book's API):

=================  =================================================================================
``foundations``    Part 0: plain Triton kernels (interpreted on a CPU) for the basics
``primer``         the Gluon primer: layouts, shared memory, TMA, a ring, warp specialisation
``softmax``        chapter 1: a row sharded over a cluster of 1 to 16 CTAs, and its picker
``barrier_model``  chapter 2's model of a multi-CTA mbarrier (groups, leaders, a script stepped): pure Python
``barriers``       chapter 2: multi-CTA mbarriers, kernels that prove the model (its names re-exported here)
``multicast``      chapter 3: who receives which tile, TMA multicast, the TMA -> MMA loop
``two_cta``        chapter 4: 2-CTA tcgen05 MMA, a 1-CTA kernel and its 2-CTA twin
``clc_matmul``     chapter 5: the persistent, warp-specialised CLC matmul (Blackwell)
``hopper_matmul``  chapter 6: the Hopper cluster matmul, its ablation and ceiling
``wide_tiles``     chapter 6's last gaps: a tile of two accumulators, 144 to 192 wide, and its rounds model
``catalog``        every chapter's kernels by name: what the lens compiles and the tests check
=================  =================================================================================

The layers under them, each a sub-package (a module imports its own layer and those named here, nothing else:
``tests/test_layers.py`` checks every import, those inside functions too):

``core/``        may import: -
    hardware (features, limits, the lens's targets), isolation, dtypes, layouts (the ownership model and cga
    checks), accuracy (element-wise checks against torch), dryrun, occupancy
``lens/``        may import: core
    compile any kernel for sm_90a / sm_100a on a CPU (compiler) and read it: ptx, sass, variants
``gluon/``       may import: core, lens
    in-kernel helpers the chapters share: scope, sync, ring, operands, matmul (the wrappers' front), tile_order
``results/``     may import: core
    the results store (results/<gpu>/*.json with provenance) and the labels generated from it
``measure/``     may import: core, lens, gluon, results
    timing, ceilings, sweeps, measured warp timelines (traces) and their demo kernels
``chapters``     may import: core, lens, gluon, results, measure
    the modules above the line; a chapter may also import the chapters before it
``catalog``      may import: core, lens, gluon, chapters
``benchmarks/``  may import: core, lens, gluon, results, measure, chapters
    each chapter's benchmark, recorded with ``python -m multicta_kernels.cli.bench NAME``
``protocols/``   may import: core, lens, gluon, chapters, catalog
    every interleaving of each kernel's mbarrier protocol, checked on a CPU (models: one per kernel)
``show/``        may import: core, lens, gluon, results, measure, chapters, catalog, protocols
    what notebooks display: notebook (banner, live runs, source, tables), widgets, plots, figures
``cli/``         may import: core, lens, gluon, results, measure, chapters, catalog, benchmarks, protocols, show
    ``python -m multicta_kernels.cli.bench`` and ``python -m multicta_kernels.cli.doctor`` (selftests, recorders)
"""
import os

# Fixed before triton is imported, so numerics don't move when Triton's default flips and no
# warning repeats in every notebook output.
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")

__version__ = "0.1.0"
