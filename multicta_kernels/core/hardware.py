"""What this machine's GPU can do: capabilities, not tiers (a Blackwell GPU does not run Hopper's wgmma).

Every live cell and every wrapper asks for the *feature* it needs:

============  =====================================================================  ======================
feature       what                                                                   runs on
============  =====================================================================  ======================
``CUDA``      plain Triton (``tl``) kernels of Part 0                                any NVIDIA GPU
``CLUSTERS``  thread-block clusters, DSMEM, cross-CTA mbarriers, TMA and multicast   sm_90 and newer
``WGMMA``     ``warpgroup_mma`` (Hopper's asynchronous tensor-core MMA)               sm_90 only
``TCGEN05``   ``tcgen05`` MMA, tensor memory, 2-CTA MMA, cluster launch control       the sm_100 family
============  =====================================================================  ======================

wgmma compiled for sm_100 ends the process (``LLVM ERROR: Cannot select: intrinsic
%llvm.nvvm.wgmma...``), so "newer" is not "more": :func:`require` raises
:class:`UnsupportedHardwareError` before anything is compiled.

:func:`pretend` makes the rest of the package believe it runs on another GPU (tests only): on a
CPU it lets a test walk a wrapper up to its launch as if a B200 were here; :func:`tensor_device` and
:func:`synchronize` are what inputs and waits go through so that the same code runs there
(``multicta_kernels.core.dryrun`` then compiles each launch for the pretended GPU and stops it).
"""
from __future__ import annotations

import contextlib
import functools
from dataclasses import dataclass


class OneLineError(Exception):
    """An error a reader should see as one line, not a traceback: the package's errors derive from it."""

    def _render_traceback_(self):          # IPython shows this line instead of a traceback
        return [f"{type(self).__name__}: {self}"]


class UnsupportedHardwareError(OneLineError, RuntimeError):
    """A kernel needs a feature (see :data:`FEATURES`) that this machine's GPU does not have."""


@dataclass(frozen=True)
class Feature:
    name: str
    what: str
    runs_on: str
    min_cap: tuple               # lowest compute capability that has it
    max_major: int = 99          # highest major version that has it

    def on(self, capability) -> bool:
        return capability is not None and self.min_cap <= tuple(capability) and capability[0] <= self.max_major

    def __str__(self) -> str:
        return self.name


CUDA = Feature("cuda", "plain Triton kernels", "any NVIDIA GPU", (7, 5))
CLUSTERS = Feature("clusters", "thread-block clusters, DSMEM, cross-CTA mbarriers, TMA and TMA multicast",
                   "sm_90 and newer (H100, H200, B200, GB200)", (9, 0))
WGMMA = Feature("wgmma", "warpgroup_mma, Hopper's asynchronous tensor-core MMA", "sm_90 only (H100, H200)",
                (9, 0), max_major=9)
TCGEN05 = Feature("tcgen05", "tcgen05 MMA, tensor memory, 2-CTA MMA and cluster launch control",
                  "the sm_100 family only (B200, GB200, B300)", (10, 0), max_major=10)
FEATURES = (CUDA, CLUSTERS, WGMMA, TCGEN05)


@dataclass(frozen=True)
class Device:
    name: str                          # e.g. "NVIDIA H200", or "CPU only"
    capability: tuple | None           # (major, minor), None without a GPU
    sms: int | None = None
    pretended: bool = False            # made up by pretend(): tensors may stay on the CPU

    def has(self, feature: Feature) -> bool:
        return feature.on(self.capability)

    @property
    def features(self) -> tuple:
        return tuple(f for f in FEATURES if self.has(f))

    @property
    def arch(self) -> str | None:
        return None if self.capability is None else f"sm_{self.capability[0]}{self.capability[1]}"

    def __str__(self) -> str:
        return self.name if self.capability is None else f"{self.name} ({self.arch})"


# ------------------------------------------------------------------------ the numbers the kernels obey
# Each limit once, with where it comes from.

MAX_CLUSTER_CTAS = 16      # CUDA Programming Guide, "Thread Block Clusters": 8 portable, 16 with the
                           # non-portable attribute (H100, H200, B200); Triton sets it for num_ctas > 8
SMEM_PER_CTA = 227 * 1024  # CUDA Programming Guide, compute capabilities table: shared memory per block
                           # (opt-in) on sm_90 and sm_100; the H200 reports 232448 bytes (results/h200/device.json)
TMEM_COLUMNS = 512         # PTX ISA, tcgen05 "Tensor Memory": 128 lanes x 512 columns of 32 bits per CTA
LANES = 32                 # threads per warp on every NVIDIA GPU
TMA_BOX_MAX = 256          # CUDA driver API, cuTensorMapEncodeTiled: at most 256 elements per box dimension
TMA_ALIGN = 16             # ... and global strides (rows) that are multiples of 16 bytes

# The architectures the book's kernels are compiled for (the lens's targets), by name: ptxas's arch number.
# Hopper kernels are written for sm_90a, Blackwell ones for sm_100a (the "a": architecture-specific
# instructions such as wgmma and tcgen05).
TARGETS = {"sm_90a": 90, "sm_100a": 100}


def log2(n: int) -> int:
    """log2 of a power of two: the number of CGA bases of a cluster of ``n`` CTAs."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1 or n & (n - 1):
        raise ValueError(f"n must be a power of two (a cluster size), got {n!r}")
    return n.bit_length() - 1


def check_cluster_size(num_ctas, low: int = 1, name: str = "num_ctas") -> int:
    """A cluster is a power of two from ``low`` to :data:`MAX_CLUSTER_CTAS` CTAs."""
    if isinstance(num_ctas, bool) or not isinstance(num_ctas, int) or num_ctas < low or \
            num_ctas > MAX_CLUSTER_CTAS or num_ctas & (num_ctas - 1):
        raise ValueError(f"{name} must be a power of two from {low} to {MAX_CLUSTER_CTAS} (the largest cluster "
                         f"Hopper and Blackwell launch), got {num_ctas!r}")
    return num_ctas


_PRETEND: list[Device] = []


@functools.lru_cache(maxsize=None)
def _detect() -> Device:
    import torch
    if not torch.cuda.is_available():
        return Device("CPU only", None)
    props = torch.cuda.get_device_properties(0)
    return Device(props.name, tuple(torch.cuda.get_device_capability(0)), props.multi_processor_count)


def device() -> Device:
    """The GPU this process uses (device 0), or a CPU-only :class:`Device`."""
    return _PRETEND[-1] if _PRETEND else _detect()


def has(feature: Feature) -> bool:
    return device().has(feature)


def require(feature: Feature, what: str, instead: str | None = None) -> Device:
    """Return the device, or raise saying which GPUs have ``feature`` and what to do instead."""
    here = device()
    if here.has(feature):
        return here
    instead = instead or "compile it for its GPU with multicta_kernels.lens and read the recorded results in results/"
    raise UnsupportedHardwareError(f"{what} needs {feature.what}, which runs on {feature.runs_on}; "
                                   f"this machine has {here}. Here, {instead}.")


def require_or_exit(what: str, *features: Feature) -> Device:
    """For command-line tools: the device, or exit with one line naming what is missing (no traceback,
    nothing written)."""
    try:
        for f in features:
            require(f, what)
    except UnsupportedHardwareError as exc:
        raise SystemExit(str(exc)) from None
    return device()


def check_on_gpu(t, name: str) -> None:
    """A tensor argument must live in GPU memory (checked after the arguments' shapes and the hardware)."""
    if t.device.type != "cuda" and not device().pretended:
        raise ValueError(f"{name} is on the {t.device.type.upper()}: move it to the GPU first ({name}.cuda())")


def tensor_device() -> str:
    """Where a caller's tensors go: "cuda", or "cpu" while a GPU is pretended (the dry run follows a wrapper up
    to its launch with CPU tensors). Tests and checks that make inputs use it instead of ``device="cuda"``."""
    return "cpu" if device().pretended else "cuda"


def synchronize() -> None:
    """``torch.cuda.synchronize()``; nothing while a GPU is pretended (nothing was launched)."""
    if not device().pretended:
        import torch
        torch.cuda.synchronize()


@contextlib.contextmanager
def pretend(capability, name: str | None = None, sms: int = 148):
    """Tests only: behave as if device 0 had ``capability`` (e.g. ``(10, 0)``); CPU tensors stand in
    for GPU ones so a wrapper can be followed up to its launch."""
    _PRETEND.append(Device(name or f"pretend sm_{capability[0]}{capability[1]}", tuple(capability), sms, True))
    try:
        yield _PRETEND[-1]
    finally:
        _PRETEND.pop()
