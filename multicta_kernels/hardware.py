"""Hardware tiers: Blackwell runs everything, Hopper most, a CPU compiles and plots.

Every GPU cell of the book branches on :func:`tier`. Kernels that need a tier call
:func:`require`, which raises :class:`UnsupportedHardwareError` with a message that says what
is missing and what the reader can do instead.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

BLACKWELL = "blackwell"
HOPPER = "hopper"
CPU = "cpu"

_RANK = {CPU: 0, HOPPER: 1, BLACKWELL: 2}
_NAMES = {BLACKWELL: "an NVIDIA Blackwell GPU (sm_100)", HOPPER: "an NVIDIA Hopper GPU (sm_90) or newer"}


class UnsupportedHardwareError(RuntimeError):
    """Raised when a kernel needs a GPU tier that this machine does not have."""


@dataclass(frozen=True)
class Tier:
    name: str                      # "blackwell", "hopper" or "cpu"
    device: str                    # e.g. "NVIDIA H200", or "CPU only"
    capability: tuple[int, int] | None

    def at_least(self, name: str) -> bool:
        return _RANK[self.name] >= _RANK[name]

    def __str__(self) -> str:
        if self.capability is None:
            return f"{self.device} (tier: {self.name})"
        major, minor = self.capability
        return f"{self.device}, sm_{major}{minor} (tier: {self.name})"


@functools.lru_cache(maxsize=None)
def tier() -> Tier:
    """Detect the tier of the current CUDA device (cached)."""
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a requirement
        return Tier(CPU, "CPU only", None)
    if not torch.cuda.is_available():
        return Tier(CPU, "CPU only", None)
    cap = torch.cuda.get_device_capability()
    name = torch.cuda.get_device_name()
    if cap[0] == 10:
        return Tier(BLACKWELL, name, cap)
    if cap[0] == 9:
        return Tier(HOPPER, name, cap)
    # Pre-Hopper GPUs and consumer Blackwell (sm_12x: clusters, but no tcgen05) take the CPU path
    # for this book's kernels; the lens and recorded results still work there.
    return Tier(CPU, f"{name} (sm_{cap[0]}{cap[1]}: not targeted by this book)", cap)


def require(needed: str, what: str) -> Tier:
    """Return the current tier, or raise if it is below ``needed`` ("hopper" or "blackwell")."""
    here = tier()
    if here.at_least(needed):
        return here
    raise UnsupportedHardwareError(
        f"{what} needs {_NAMES[needed]}; this machine has {here}. "
        "On other machines, compile it for that GPU with multicta_kernels.lens and read the "
        "recorded benchmarks in results/.")
