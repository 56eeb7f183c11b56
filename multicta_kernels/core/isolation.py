"""Run a Triton call in a child process, so that an abort inside Triton becomes an exception.

Some invalid inputs (a ``cga_layout`` basis that is not a power of two, a tensor shape that is not
one) make Triton's C++ end the whole process instead of raising. In a notebook that kills the
kernel and the reader loses everything. :func:`isolated` forks first: the child runs the call and
sends the result back; if the child dies, the parent raises :class:`TritonAborted` with the first
error line the child printed.
"""
from __future__ import annotations

import os
import tempfile

from .hardware import OneLineError


class TritonAborted(OneLineError, RuntimeError):
    """Triton ended the process it ran in (an LLVM or MLIR abort); the message is its last words."""


class IsolatedTimeout(OneLineError, TimeoutError):
    """The child process did not answer within its time limit; it was killed."""


TIMEOUT = 900.0      # seconds: the default limit of one isolated call (the slowest lens compile takes about a minute)


def isolated(fn, *args, timeout: float = TIMEOUT):
    """``fn(*args)`` in a forked child process; its result, or its exception re-raised here, or
    :class:`TritonAborted` if the child died, or :class:`IsolatedTimeout` (the child killed) if it has not
    answered after ``timeout`` seconds."""
    import math
    import multiprocessing
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not math.isfinite(timeout) or timeout <= 0:
        raise ValueError(f"timeout must be a finite number of seconds above 0, got {timeout!r}")   # (core.validate
    if not callable(fn):                                                        # would lift this module a floor)
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    if not hasattr(os, "fork"):                      # no fork on this platform: run it here
        return fn(*args)
    ctx = multiprocessing.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    with tempfile.TemporaryFile(mode="w+b") as err:
        child = ctx.Process(target=_child, args=(send, err.fileno(), fn, args), daemon=True)
        child.start()
        send.close()
        try:
            if not recv.poll(timeout):
                child.kill()
                child.join()
                raise IsolatedTimeout(f"{getattr(fn, '__name__', 'the call')} did not finish within {timeout:g} s "
                                      f"(timeout); its process was killed")
            kind, value = recv.recv()
        except EOFError:                             # the child died before answering
            child.join()
            err.seek(0)
            raise TritonAborted(abort_message(err.read().decode(errors="replace"), child.exitcode)) from None
        finally:
            recv.close()
        child.join()
    if kind == "raise":
        raise value
    return value


def _child(conn, err_fd, fn, args):
    import faulthandler
    faulthandler.disable()                           # an abort here is expected: no Python stack dump
    os.dup2(err_fd, 2)                               # what Triton prints before it aborts
    try:
        try:
            conn.send(("ok", fn(*args)))
        except Exception as exc:  # every error goes back to the parent, which raises it
            try:
                conn.send(("raise", exc))
            except Exception:  # an exception that cannot be pickled: send its text
                conn.send(("raise", RuntimeError(f"{type(exc).__name__}: {exc}")))
    finally:
        os._exit(0)


def abort_message(stderr_text: str, exitcode) -> str:
    """One line from what an aborting process printed: its first error or assertion."""
    lines = [ln.strip() for ln in stderr_text.splitlines() if ln.strip()]
    lines = [ln for ln in lines if "nanobind" not in ln and "leaked" not in ln and not ln.startswith(("#", "-"))]
    errors = [ln for ln in lines if any(w in ln for w in ("error", "Error", "ERROR", "Assertion", "assert"))]
    what = (errors or lines or ["no message"])[0]
    return f"Triton aborted (exit status {exitcode}): {what[:300]}"
