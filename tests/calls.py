"""A helper the matmul tests share: a bad call must be refused for what it is, before any hardware check.

Imported as ``from calls import ...`` (pytest puts tests/ on ``sys.path``, as for nbcells and random_layouts).
"""
import contextlib

import pytest
import torch

from multicta_kernels.core import hardware


def assert_refused_before_hardware(prepare, m, n, k, kwargs, exc, msg, capability):
    """``prepare(a, b, **kwargs)`` on fp16 CPU operands (A m x k; B k x n, or a transposed view of it when
    kwargs has ``b_transposed``) raises ``exc`` matching ``msg``: on a CPU (``capability`` None) and on a
    pretended GPU of that compute capability. A bad argument is reported as such, not as missing hardware."""
    a = torch.randn(m, k, dtype=torch.float16)
    b = torch.randn(k, n, dtype=torch.float16)
    kwargs = dict(kwargs)
    if kwargs.pop("b_transposed", False):
        b = torch.randn(n, k, dtype=torch.float16).T
    with hardware.pretend(capability) if capability else contextlib.nullcontext():
        with pytest.raises(exc, match=msg):
            prepare(a, b, **kwargs)
