"""A reader's edited copy of a kernel: compiled from its own module, swapped into a spec."""
from __future__ import annotations


def module_from_source(name: str, src: str, folder):
    """``src`` written to ``folder/name.py`` and imported as module ``name`` (registered in ``sys.modules``,
    where Gluon's aggregates resolve their annotations): ``@gluon.jit`` reads a function's source from its
    file, so an edited copy of a kernel needs one before it can compile."""
    import importlib.util
    import sys
    from pathlib import Path
    path = Path(folder) / f"{name}.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def variant(fn, edits=None, drop=None, name: str | None = None, folder=None):
    """A copy of the kernel ``fn`` (a ``@gluon.jit`` or ``@triton.jit`` function) with ``edits`` applied (old text ->
    new text, each occurring exactly once) and without the lines whose code (comment aside) is ``drop``: the
    edited kernel, compiled from a module that star-imports ``fn``'s own, so it sees what ``fn`` sees. For
    "what if this line were missing" in the chapters and the tests: ``lens.with_kernel(spec, variant(...))``."""
    import inspect
    import tempfile
    import textwrap
    target = getattr(fn, "fn", fn)
    module = inspect.getmodule(target)
    src = textwrap.dedent(inspect.getsource(target))
    for old, new in (edits or {}).items():
        if src.count(old) != 1:
            raise ValueError(f"edit {old!r} occurs {src.count(old)} times in {target.__name__}, not once")
        src = src.replace(old, new)
    if drop is not None:
        lines = src.splitlines()
        kept = [ln for ln in lines if ln.split("#")[0].strip() != drop]
        if len(kept) == len(lines):
            raise ValueError(f"{target.__name__} has no line {drop!r}")
        src = "\n".join(kept)
    head = f"from {module.__name__} import *\nfrom triton.experimental import gluon\nimport triton\n\n\n"
    name = name or f"{target.__name__}_variant_{abs(hash(src)) % 10**8}"
    mod = module_from_source(name, head + src, folder or tempfile.mkdtemp())
    return getattr(mod, target.__name__)


def with_kernel(spec, fn, **constexprs):
    """``spec`` with its kernel replaced by ``fn`` (a reader's edited copy) and ``constexprs`` changed: the
    same layouts and options, and only the arguments ``fn`` has (a copy may drop, say, an INSTRUMENT flag)."""
    from dataclasses import replace
    keep = fn.arg_names                                # a @gluon.jit function's arguments
    unknown = set(constexprs) - set(keep)
    if unknown:
        raise KeyError(f"{fn.__name__} has no argument {sorted(unknown)}; its arguments: {keep}")
    consts = {**spec.constexprs, **constexprs}
    return replace(spec, name=f"{spec.name} (your copy)", fn=fn,
                   signature={k: v for k, v in spec.signature.items() if k in keep},
                   constexprs={k: v for k, v in consts.items() if k in keep})
