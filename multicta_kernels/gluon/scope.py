"""Timeline scopes inside a Gluon kernel: ``with scope("load", INSTRUMENT):``.

Each scope is a proton scope when the constexpr ``INSTRUMENT`` is true and proton's instrumentation is on
while the kernel compiles (two time stamps per warp); otherwise it compiles to nothing at all, so a kernel
with scopes has the very same PTX as one without (``tests/test_timeline.py``). Recording and reading the
timelines: :mod:`multicta_kernels.measure.traces`.
"""
from __future__ import annotations

import re

import triton.profiler.language as pl
from triton.language.core import _unwrap_if_constexpr


class scope:
    """``with scope("load", INSTRUMENT):`` in a Gluon kernel: a proton scope when the constexpr
    ``INSTRUMENT`` is true (and proton's instrumentation is on), no code at all otherwise."""
    __triton_builtin__ = True              # lets @gluon.jit code use this class, like pl.scope

    def __init__(self, name, on=True, _semantic=None):
        self.name, self.on, self._semantic = _unwrap_if_constexpr(name), _unwrap_if_constexpr(on), _semantic

    def __enter__(self):
        if self.on:
            pl.enter_scope(self.name, _semantic=self._semantic)

    def __exit__(self, *exc):
        if self.on:
            pl.exit_scope(self.name, _semantic=self._semantic)


def scope_names(fn) -> list[str]:
    """The timeline scopes a Gluon function (or its ``@gluon.jit`` wrapper) opens, in source order: what a
    recorded timeline of that partition can show."""
    import inspect
    return re.findall(r'scope\("(\w+)"', inspect.getsource(getattr(fn, "fn", fn)))
