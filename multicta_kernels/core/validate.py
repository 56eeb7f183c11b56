"""One check per kind of value, used where each value enters a public function.

A caller's mistake is refused before anything is compiled or any hardware is asked, with one line that
names the parameter and what it accepts (``ValueError`` for a value out of range, ``TypeError`` for a
value of the wrong kind). Each helper returns the value, normalised (an ``int`` for an integer, a tuple of
tuples for bases), so a function can write ``stages = validate.count(stages, "stages", high=16)``.

Sizes that only drive Python loops (tile orders, protocol models, receivers) are capped at
:data:`MAX_LOOP` so a huge one is refused instead of running for hours.
"""
from __future__ import annotations

import math
import numbers

from .hardware import MAX_CLUSTER_CTAS

MAX_LOOP = 1 << 20        # the largest count a pure-Python loop of the package takes (tiles, rounds, CTAs listed)
MAX_TIMEOUT = 24 * 3600   # seconds: the longest time limit a call accepts


def shown(value, limit: int = 60) -> str:
    """``repr(value)`` on one line, cut to ``limit`` characters (a message stays one line)."""
    text = " ".join(repr(value).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


def integer(value, name: str, low: int | None = None, high: int | None = None) -> int:
    """An integer (not a bool, not a float with an integral value) from ``low`` to ``high`` (either may be None)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer{_range(low, high)}, got {shown(value)}")
    value = int(value)
    if (low is not None and value < low) or (high is not None and value > high):
        raise ValueError(f"{name} must be an integer{_range(low, high)}, got {value}")
    return value


def count(value, name: str, low: int = 1, high: int = MAX_LOOP) -> int:
    """A positive count (sizes, tiles, stages, rounds, runs): an integer from ``low`` (1) to ``high``."""
    return integer(value, name, low, high)


def optional_count(value, name: str, low: int = 1, high: int = MAX_LOOP):
    """None (the default is chosen later) or a :func:`count`."""
    return None if value is None else count(value, name, low, high)


def power_of_two(value, name: str, low: int = 1, high: int = MAX_LOOP, what: str = "") -> int:
    """A power of two from ``low`` to ``high``; ``what`` says why (e.g. "a block is a power of two")."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be a power of two from {low} to {high}{what}, got {shown(value)}")
    v = int(value)
    if v < low or v > high or v & (v - 1):
        raise ValueError(f"{name} must be a power of two from {low} to {high}{what}, got {v}")
    return v


def cluster_size(value, name: str = "num_ctas", low: int = 1) -> int:
    """A cluster: a power of two from ``low`` to :data:`MAX_CLUSTER_CTAS` CTAs."""
    return power_of_two(value, name, low, MAX_CLUSTER_CTAS, " (the largest cluster Hopper and Blackwell launch)")


def index(value, name: str, size: int, what: str = "") -> int:
    """An index into ``size`` things (a CTA of a cluster, a slot of a ring): an integer from 0 to size - 1."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer from 0 to {size - 1}{what}, got {shown(value)}")
    if not 0 <= value < size:
        raise ValueError(f"{name} must be from 0 to {size - 1}{what}, got {int(value)}")
    return int(value)


def boolean(value, name: str) -> bool:
    """True or False (a string such as 'no' is truthy in Python: refuse it rather than guess)."""
    if not isinstance(value, bool):
        try:
            import numpy as np
            if isinstance(value, np.bool_):
                return bool(value)
        except ImportError:                                        # pragma: no cover
            pass
        raise TypeError(f"{name} must be True or False, got {shown(value)}")
    return value


def one_of(value, name: str, choices, what: str = "") -> object:
    """One of ``choices`` (compared with ==; a value of another type is refused the same way); ``what`` says why."""
    choices = tuple(choices)
    try:
        ok = any(type(value) is type(c) and value == c for c in choices)
    except Exception:                                              # an uncomparable value is not a choice
        ok = False
    if not ok:
        shown_choices = [repr(c) for c in choices]
        listed = (", ".join(shown_choices[:-1]) + " or " + shown_choices[-1]) if len(choices) > 1 else shown_choices[0]
        raise ValueError(f"{name} must be {listed}{what}, got {shown(value)}")
    return value


def finite(value, name: str, low: float | None = None, high: float | None = None, positive: bool = False) -> float:
    """A real, finite number (not NaN, not an infinity), from ``low`` to ``high``; ``positive``: above 0."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a finite number{_frange(low, high, positive)}, got {shown(value)}")
    v = float(value)
    if not math.isfinite(v) or (positive and v <= 0) or (low is not None and v < low) or \
            (high is not None and v > high):
        raise ValueError(f"{name} must be a finite number{_frange(low, high, positive)}, got {shown(value)}")
    return v


def timeout(value, name: str = "timeout") -> float:
    """A time limit in seconds: a finite number above 0, at most a day."""
    return finite(value, name, high=MAX_TIMEOUT, positive=True)


def text(value, name: str) -> str:
    """A string (a single pattern, a name)."""
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a string, got {shown(value)}")
    return value


def names(value, name: str, known) -> list:
    """A list (or tuple, or set) of names, each one of ``known``: an unknown name is refused, not skipped."""
    if isinstance(value, str) or not isinstance(value, (list, tuple, set, frozenset)):
        raise TypeError(f"{name} must be a list of names, got {shown(value)}")
    known = list(known)
    bad = [v for v in value if v not in known]
    if bad:
        raise ValueError(f"{name} holds unknown name(s) {shown(bad)}; known: {shown(known, 200)}")
    return list(value)


def bases(value, name: str, num_ctas: int | None = None, rank: int | None = None, nonzero: bool = False) -> tuple:
    """A cga_layout: log2(num_ctas) bases (when ``num_ctas`` is given), each ``rank`` (when given) integers
    >= 0; ``nonzero``: no all-zero basis (a broadcast), for uses that need every CTA to hold its own tile."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise TypeError(f"{name} must be a list of bases (tuples of integers), got {shown(value)}")
    out = []
    for b in value:
        if isinstance(b, (str, bytes)) or not isinstance(b, (list, tuple)) or not b or \
                any(isinstance(x, bool) or not isinstance(x, numbers.Integral) or x < 0 for x in b):
            raise TypeError(f"{name} must be a list of bases, each a tuple of integers >= 0, got {shown(value)}")
        out.append(tuple(int(x) for x in b))
    if len({len(b) for b in out}) > 1 or (rank is not None and out and len(out[0]) != rank):
        raise ValueError(f"{name}: every basis must have {rank or 'the same number of'} coordinates, "
                         f"got {shown(value)}")
    if num_ctas is not None and len(out) != num_ctas.bit_length() - 1:
        raise ValueError(f"{name} must have log2({num_ctas}) = {num_ctas.bit_length() - 1} bases for "
                         f"{num_ctas} CTAs, got {len(out)}: {shown(value)}")
    if nonzero and any(not any(b) for b in out):
        raise ValueError(f"{name} must have no all-zero basis here, got {shown(value)}")
    return tuple(out)


def tensor(value, name: str, rank: int | None = None, dtypes=None):
    """A torch tensor of ``rank`` dimensions (when given) and one of ``dtypes`` (when given)."""
    import torch
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch tensor, got {shown(value)}")
    if rank is not None and value.dim() != rank:
        raise ValueError(f"{name} must be a {rank}-D tensor, got shape {tuple(value.shape)}")
    if dtypes is not None and value.dtype not in tuple(dtypes):
        raise TypeError(f"{name} must be a tensor of {', '.join(str(d).removeprefix('torch.') for d in dtypes)}, "
                        f"got {str(value.dtype).removeprefix('torch.')}")
    return value


def _range(low, high) -> str:
    if low is not None and high is not None:
        return f" from {low} to {high}"
    if low is not None:
        return f" >= {low}"
    if high is not None:
        return f" <= {high}"
    return ""


def _frange(low, high, positive) -> str:
    parts = (["above 0"] if positive else []) + ([f">= {low}"] if low is not None else []) + \
        ([f"<= {high}"] if high is not None else [])
    return " " + " and ".join(parts) if parts else ""


def dtype(value, name: str = "dtype") -> str:
    """One of the dtypes the book's kernels take (:data:`multicta_kernels.core.dtypes.DTYPES`), as torch, Gluon or
    by name ("float16", "fp16"); returns its name."""
    from .dtypes import DTYPES, dtype_name
    try:
        got = dtype_name(value)
    except Exception:                                              # an object whose str() fails is no dtype
        got = None
    if got not in DTYPES:
        raise ValueError(f"{name} must be one of {', '.join(DTYPES)}, got {shown(value)}")
    return got


def target(value, name: str = "target") -> str:
    """A lens target ("sm_90a" or "sm_100a")."""
    from .hardware import TARGETS
    return one_of(value, name, tuple(TARGETS))
