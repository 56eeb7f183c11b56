"""Kernels and helpers for the book *Multi-CTA programming in Gluon*.

One module per idea, in book order:

========================  ==========================================================
``hardware``              which tier we are on (Blackwell, Hopper, CPU) and the error
                          raised when a kernel needs hardware that is not here
``lens``                  compile any registered kernel for sm_90a / sm_100a on a CPU
                          and read its PTX: excerpts and an instruction census
``layouts``               ownership maps (CTA, warp, lane, register) parsed from
                          Triton's own layout views, and the heatmaps drawn from them
``foundations``           Part 0: plain Triton kernels (interpreted on a CPU) for the basics
``tile_order``            tile orders and their L2 traffic (Part 0, chapter 5)
``softmax``               chapter 1: a row sharded over a cluster of 1 to 16 CTAs
``barriers``              chapter 2: multi-CTA mbarriers, a model and kernels that prove it
``multicast``             chapter 3: operand layouts, TMA multicast, the TMA -> MMA loop
``two_cta``               chapter 4: 2-CTA tcgen05 MMA, a 1-CTA kernel and its 2-CTA twin
``clc_matmul``            chapter 5: the persistent, warp-specialised CLC matmul (Blackwell)
``hopper_matmul``         chapter 6: the Hopper cluster matmul, its ablation and ceiling
``bench``                 ceilings, timing and the results store; ``python -m
                          multicta_kernels.bench NAME --out results/...``
``plots``                 benchmark figures with ceilings drawn as lines
``notebook``              what every chapter's notebook needs: source rendering, glue
========================  ==========================================================
"""
import os

# Fixed before triton is imported, so numerics don't move when Triton's default flips and no
# warning repeats in every notebook output.
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")

__version__ = "0.1.0"
