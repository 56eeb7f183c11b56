"""Kernels and helpers for the book *Multi-CTA programming in Gluon*.

One module per idea, in book order:

========================  ==========================================================
``hardware``              what this GPU can do (clusters, wgmma, tcgen05), the limits
                          kernels obey, and the error raised when a feature is missing
``isolation``             a Triton call in a child process: an abort becomes an exception
``lens``                  compile any kernel for sm_90a / sm_100a on a CPU and read its
                          PTX: excerpts and an instruction census
``layouts``               ownership maps (CTA, warp, lane, register) parsed from
                          Triton's own layout views, and the heatmaps drawn from them
``checks``                element-wise comparisons against PyTorch (tests, doctor, notebooks)
``foundations``           Part 0: plain Triton kernels (interpreted on a CPU) for the basics
``tile_order``            tile orders, in Python and in Gluon, and their L2 traffic
``softmax``               chapter 1: a row sharded over a cluster of 1 to 16 CTAs
``barriers``              chapter 2: multi-CTA mbarriers, a model and kernels that prove it
``cluster``               shared cluster machinery: operand layouts, descriptors, the stage
                          ring and its release, the matmul front end
``multicast``             chapter 3: who receives which tile, TMA multicast, the TMA -> MMA loop
``two_cta``               chapter 4: 2-CTA tcgen05 MMA, a 1-CTA kernel and its 2-CTA twin
``clc_matmul``            chapter 5: the persistent, warp-specialised CLC matmul (Blackwell)
``hopper_matmul``         chapter 6: the Hopper cluster matmul, its ablation and ceiling
``catalog``               the book's kernels by name: what the lens compiles and the tests check
``protocols``             every interleaving of each kernel's mbarrier protocol, checked on a CPU
``timeline``              measured warp timelines (proton) inside the kernels
``bench``                 ceilings, timing and the results store; ``python -m
                          multicta_kernels.bench NAME --out results/...``
``plots``                 benchmark figures with ceilings drawn as lines
``widgets``               interactive explorers (layouts, barriers, multicast receivers)
``notebook``              what every chapter's notebook needs: banner, live runs, source, glue
``doctor``                the self-test of a new GPU node: ``python -m multicta_kernels.doctor``
========================  ==========================================================
"""
import os

# Fixed before triton is imported, so numerics don't move when Triton's default flips and no
# warning repeats in every notebook output.
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")

__version__ = "0.1.0"
