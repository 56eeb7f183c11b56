"""The PTX lens: compile a Gluon kernel for any NVIDIA target on a machine without a GPU, and read it.

``from multicta_kernels import lens`` gives the whole lens in one name, as the chapters use it:

==============  ============================================================================
``compiler``    :class:`KernelSpec`, :func:`compile` (a spec for sm_90a or sm_100a, in a child
                process: an abort becomes :class:`LensCompileError`), :func:`specialise`
``ptx``         reading PTX: :func:`instructions`, :func:`census`, :func:`operand_census`,
                :func:`excerpt`, :func:`predicate_chain`, :func:`loops`, :func:`schedule`, ...
``sass``        :func:`sass`, :func:`sass_census` and :func:`resources`, from Triton's own ptxas
``variants``    a reader's edited copy of a kernel: :func:`variant`, :func:`with_kernel`
==============  ============================================================================

The book's kernels by name (their specs) are :mod:`multicta_kernels.catalog`'s; the lens knows no chapter.
"""
from ..core.hardware import TARGETS
from .compiler import Compiled, KernelSpec, LensCompileError, check_spec, compile, specialise
from .ptx import (SYNC_OPS, Loop, census, census_changes, cluster_exchanges, code, excerpt, instructions,
                  init_fence_problems, issuing_ctas, loop_body, loops, mbarrier_init_counts, operand_census, per_iteration,
                  predicate_chain, register_renaming, same_code, same_schedule, schedule, schedule_table)
from .sass import resources, sass, sass_census
from .variants import module_from_source, variant, with_kernel

__all__ = ["TARGETS", "Compiled", "KernelSpec", "LensCompileError", "check_spec", "compile", "specialise", "SYNC_OPS",
           "Loop", "census", "census_changes", "cluster_exchanges", "code", "excerpt", "init_fence_problems", "instructions", "issuing_ctas",
           "loop_body", "loops", "mbarrier_init_counts", "operand_census", "per_iteration", "predicate_chain",
           "register_renaming", "same_code", "same_schedule", "schedule", "schedule_table", "resources", "sass",
           "sass_census", "module_from_source",
           "variant", "with_kernel"]
