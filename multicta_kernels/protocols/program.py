"""The kernel's own program, run on the CPU: the tie by program.

A Gluon kernel is a Python function. :func:`run` runs its source (and the partitions, helpers and aggregate
methods it calls) in plain Python for one CTA of the cluster, with the Gluon builtins replaced by recorders:
``mbarrier.wait(bar, phase)`` records ``wait=0`` or ``wait=1``, ``tma.async_load`` records ``tma_load>N`` (N the
CTAs it lands in), an op whose ``pred`` is false records nothing, and every tensor is an opaque value that absorbs
whatever is done to it. Loops run with the runtime sizes the protocol model was built for (``Protocol.runtime``,
which may also set a constexpr, e.g. the tile stream's CHECK path), so the result is the sequence of barrier
operations that CTA's partitions perform, parities included, in the kinds of :func:`agreement.model_sequences`
with ``data=True``. (An arrive of Gluon's own is not resolved to the CTAs it reaches; the fences the compiler
adds are not seen.)

:func:`tie` compares CTA 0's program with the model, op for op. The PTX ties (:func:`agreement.compare`,
:func:`agreement.order`) cannot see a parity the kernel computes at run time (it is a register) nor the order
of operations across two turns of a loop; this one sees both, because it runs the loops. What it cannot see is
what the compiler does with the source: that is what the PTX ties are for (and why the mutation harness calls a
mutant whose PTX is the kernel's equivalent before it asks this tie). A branch on a tensor (a value only the GPU
knows) is refused with the line that makes it.
"""
from __future__ import annotations

import math
import re
import sys
import types

from triton.language.core import constexpr as _constexpr

from .. import catalog, hopper_matmul
from ..core.dtypes import DTYPES
from ..gluon import convert, sync
from .agreement import model_sequences
from . import models
from .language import Protocol, ch2, commit_targets, multicast_group

MAX_TRACE_OPS = 200_000          # operations one CTA records: far above the book's models (a runaway loop stops here)


class TraceError(ValueError):
    """The kernel's program could not be followed on the CPU (one line: what and where)."""


# ------------------------------------------------------------------ opaque values

class Opaque:
    """A value the trace does not follow (a tensor, a layout, an address): every operation on it gives it back."""

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return self

    def __call__(self, *args, **kwargs):
        return self

    def __getitem__(self, key):
        return self

    def __bool__(self):
        frame = sys._getframe(1)
        raise TraceError(f"a branch on a tensor at {frame.f_code.co_filename.rsplit('/', 1)[-1]}:{frame.f_lineno}: "
                         "only the GPU knows its value")

    def __iter__(self):
        raise TraceError("a loop over a tensor: only the GPU knows its length")

    def __repr__(self):
        return "<opaque>"

    def split(self, *args, **kwargs):        # a tensor's split: its two halves
        return OPAQUE, OPAQUE


def _opaque_op(self, *args):
    return OPAQUE


for _name in ("add", "sub", "mul", "truediv", "floordiv", "mod", "and", "or", "xor", "lshift", "rshift", "pow",
              "lt", "le", "gt", "ge", "eq", "ne"):
    setattr(Opaque, f"__{_name}__", _opaque_op)
    setattr(Opaque, f"__r{_name}__", _opaque_op)
for _name in ("neg", "pos", "invert", "abs"):
    setattr(Opaque, f"__{_name}__", _opaque_op)
Opaque.__hash__ = object.__hash__
OPAQUE = Opaque()


def _known(value, what):
    """A Python int/bool from a traced value, or a TraceError naming ``what``."""
    if isinstance(value, Opaque):
        raise TraceError(f"{what} depends on a tensor: only the GPU knows it")
    return value


class Buffer(Opaque):
    """Shared memory (or a barrier array, or tensor memory): ``.index(i)`` is one slot; a load is a read, a store a
    write. ``layout``: its layout where the kernel gives a real one (the CGA bases of an MMA's operands, the
    ``two_ctas`` of its accumulator)."""

    def __init__(self, tracer, shape=(), name="smem", layout=None):
        self._tracer, self._shape, self._name, self._layout = tracer, list(shape), name, layout

    def index(self, i):
        return Buffer(self._tracer, self._shape[1:], self._name, self._layout)

    def _view(self, *args, **kwargs):
        return Buffer(self._tracer, self._shape, self._name, self._layout)

    @property
    def bases(self):
        return [list(b) for b in getattr(self._layout, "cga_layout", None) or []]

    @property
    def two_ctas(self):
        return bool(getattr(self._layout, "two_ctas", False))

    slice = permute = reshape = _reinterpret = _view

    def load(self, *args, **kwargs):
        self._tracer.record("read")
        if self._name != "tmem":
            self._tracer.record("~generic read")
        return OPAQUE

    def store(self, value, *args, **kwargs):
        self._tracer.record("write")
        if self._name != "tmem":
            self._tracer.record("~generic write")

    @property
    def shape(self):
        return self._shape


class Descriptor(Opaque):
    """A TMA descriptor from the spec's signature: its block shape and bytes per CTA are known."""

    def __init__(self, text, name=None):
        self.name = name
        m = re.match(r"tensordesc<(\w+)\[([\d,]+)\],(.*)>$", text)
        self.block_shape = [int(x) for x in m.group(2).split(",")]
        elem = {"fp16": 2, "bf16": 2, "fp32": 4, "i32": 4, "i8": 1, "fp8e4nv": 1}.get(m.group(1), 2)
        split = sum(1 for b in re.findall(r"\[([\d, ]+)\]", m.group(3).split("cga_layout=", 1)[-1])
                    if any(int(x) for x in b.split(",")))
        self.nbytes_per_cta = math.prod(self.block_shape) * elem >> split
        cga = m.group(3).split("cga_layout=", 1)[-1]
        self.bases = [[int(x) for x in b.split(",")] for b in re.findall(r"\[([\d, ]+)\]", cga)]
        self.layout = type("DescriptorLayout", (), {"cga_layout": self.bases})()
        self.block_type = OPAQUE


class ClcAnswer(Opaque):
    """``clc.load_result``: canceled (with the next tile) while the model's schedule has tiles left."""

    def __init__(self, tile):
        self._tile = tile

    def is_canceled(self):
        return self._tile is not None

    def program_id(self, axis=0):
        return self._tile


# ------------------------------------------------------------------ the recorder and its builtins

class Tracer:
    def __init__(self, num_ctas: int, cta: int, grid: int, clc_tiles=(), program: int = 0):
        self.num_ctas, self.cta, self.grid, self.program = num_ctas, cta, grid, program
        self.coords: list = []          # (partition, "load" or "store", descriptor, coordinate) where it is known
        self.clc_tiles = list(clc_tiles)           # the tiles each partition's successful cancels return, in order
        self.partitions: dict = {}
        self.current = "main"
        self.count = 0
        self._answers: dict = {}

    def record(self, kind):
        self.count += 1
        if self.count > MAX_TRACE_OPS:
            raise TraceError(f"more than {MAX_TRACE_OPS} operations in one CTA: a loop that does not end")
        self.partitions.setdefault(self.current, []).append(kind)

    def answer(self):
        i = self._answers.get(self.current, 0)
        self._answers[self.current] = i + 1
        return ClcAnswer(self.clc_tiles[i] if i < len(self.clc_tiles) else None)


def _on(pred):
    return bool(_known(pred, "a predicate"))


def _builtins(tr: Tracer) -> dict:
    """The Gluon names a kernel module uses, as recorders."""
    rec = tr.record

    class Namespace(Opaque):
        def __init__(self, **kw):
            self.__dict__.update(kw)

    def wait(bar, phase, pred=True, deps=None, **kw):
        if _on(pred):
            phase = _known(phase, "a wait's parity")
            rec(f"wait={int(phase) & 1}")

    def arrive(bar, count=1, pred=True, from_cta=None, **kw):
        if not _on(pred):
            return
        if from_cta is None:
            return rec("arrive")
        to = ch2.broadcast_targets(_known(from_cta, "from_cta"), tr.num_ctas).get(tr.cta, [])
        consecutive = to == list(range(to[0], to[0] + len(to))) if to else False
        rec(f"arrive@{to[0]}x{len(to)}" if consecutive else "arrive")

    def expect(bar, nbytes, pred=True, **kw):
        if _on(pred):
            rec("expect")

    def allocate_mbarrier(batch=None, two_ctas=False, **kw):
        return Buffer(tr, [batch or 1], "mbarrier")

    mbarrier = Namespace(init=lambda *a, **k: None, wait=wait, arrive=arrive, expect=expect,
                         invalidate=lambda bar, **k: rec("invalidate"), allocate_mbarrier=allocate_mbarrier,
                         MBarrierLayout=OPAQUE, fence_init_release_cluster=lambda *a, **k: None,
                         sync_cluster_init=lambda *a, **k: None)

    def where(op, desc, coord):
        if not any(isinstance(c, Opaque) for c in coord):
            tr.coords.append((tr.current, op, getattr(desc, "name", None), tuple(coord)))

    def async_load(desc, coord, bar, smem, pred=True, multicast=False, **kw):
        if _on(pred):
            bases = getattr(desc, "bases", [])
            issuer, to = multicast_group(bases, tr.cta, tr.num_ctas, _known(multicast, "multicast"))
            rec(f"tma_load>{len(to) if issuer == tr.cta else 0}")
            where("load", desc, coord)

    def async_store(desc, coord, smem, pred=True, **kw):
        if _on(pred):
            rec("~async read")
            rec("tma_store")
            where("store", desc, coord)

    tma = Namespace(async_load=async_load, async_store=async_store, store_wait=lambda n=0, **k: rec("store_wait"),
                    tensor_descriptor=OPAQUE)

    def wgmma(*args, **kw):
        rec("~async read")
        rec("wgmma")
        return OPAQUE

    def wgmma_wait(num_outstanding=0, deps=(), **kw):
        rec(f"wgmma_wait({_known(num_outstanding, 'a wgmma wait depth')})")
        return [OPAQUE] * len(deps) if len(deps) > 1 else OPAQUE

    def cluster_barrier(relaxed=False, **kw):
        if not relaxed:                        # sync_inits' relaxed barrier: the tie drops it as the compiler's
            rec("cluster_barrier")

    def st_async(dst, value, bar, pred=True, **kw):
        if _on(pred):
            rec("st_async")

    hopper = Namespace(cluster=Namespace(barrier=cluster_barrier), mbarrier=mbarrier, tma=tma,
                       fence_async_shared=lambda *a, **k: rec("~fence"), warpgroup_mma=wgmma,
                       warpgroup_mma_wait=wgmma_wait, async_store=st_async,
                       CachePolicy=OPAQUE, FractionalEvictionPolicy=OPAQUE)

    def tcgen05_mma(a, b, acc, *args, mbarriers=None, mbarrier_preds=None, pred=True, multicast=False, **kw):
        if not _on(pred):
            return
        rec("~async read")
        two = getattr(acc, "two_ctas", False)
        leader = tr.cta & ~1 if two else tr.cta
        to = commit_targets(leader, [getattr(a, "bases", []), getattr(b, "bases", [])], tr.num_ctas,
                            _known(multicast, "multicast"), two)
        preds = mbarrier_preds if mbarrier_preds is not None else [True] * len(mbarriers or ())
        for p in preds:
            if _on(p):
                rec(f"commit>{len(to) if leader == tr.cta else 0}")

    def tcgen05_commit(bar, pred=True, **kw):
        if _on(pred):
            rec("commit")                       # the book's kernels commit through tcgen05_mma's mbarriers

    def try_cancel(result, bar, **kw):
        rec("try_cancel")

    def load_result(src, **kw):
        rec("read")
        return tr.answer()

    clc = Namespace(try_cancel=try_cancel, load_result=load_result)

    def allocate_shared_memory(dtype, shape, layout=None, value=None, **kw):
        return Buffer(tr, shape, layout=layout)

    def warp_specialize(functions_and_args, worker_num_warps=None, worker_num_regs=None, **kw):
        outer = tr.current
        result = None
        for i, (fn, args) in enumerate(functions_and_args):
            tr.current = outer if i == 0 else f"{getattr(fn, '__name__', 'worker')} {i}"
            out = fn(*args)
            if i == 0:
                result = out
        tr.current = outer
        return result

    def cdiv(a, b):
        return OPAQUE if isinstance(a, Opaque) or isinstance(b, Opaque) else -(-a // b)

    def _pick(f):
        return lambda a, b, *r, **k: OPAQUE if isinstance(a, Opaque) or isinstance(b, Opaque) else f(a, b)

    def where_(cond, x, y, *a, **k):           # on integers (a tile index); a tensor's is opaque
        if any(isinstance(v, Opaque) for v in (cond, x, y)):
            return OPAQUE
        return x if cond else y

    gl = Namespace(constexpr=lambda x=None: x, static_range=range, program_id=lambda axis=0: tr.program,
                   num_programs=lambda axis=0: tr.grid, num_ctas=lambda: tr.num_ctas, to_tensor=lambda x: x,
                   cdiv=cdiv, minimum=_pick(min), maximum=_pick(max), where=where_, barrier=lambda *a, **k: rec("~cta barrier"),
                   warp_specialize=warp_specialize, allocate_shared_memory=allocate_shared_memory)

    blackwell = {"tcgen05_mma": tcgen05_mma, "tcgen05_commit": tcgen05_commit, "clc": clc,
                 "allocate_tensor_memory": lambda dtype, shape, layout=None, *a, **k: Buffer(tr, shape, "tmem", layout), "TensorMemoryLayout": OPAQUE,
                 "tensor_memory_descriptor": OPAQUE,
                 "tcgen05_mma_barrier_count": lambda *a, **k: 1, "get_tmem_reg_layout": lambda *a, **k: OPAQUE}

    class Scope:
        def __init__(self, *a, **k):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    helpers = {
        (sync.__name__, "cluster_rank"): lambda: tr.cta,
        (sync.__name__, "release_arrive"): lambda bar, cta, pred=True, n=1: _on(pred) and (rec("~release"), rec(
            f"arrive@{_known(cta, 'the CTA an arrive reaches')}x{_known(n, 'its lane count')}")),
        (sync.__name__, "acquire_wait"): lambda bar, phase, pred=True: _on(pred) and rec(
            f"wait={int(_known(phase, 'a wait parity')) & 1}"),
        (sync.__name__, "cluster_fence"): lambda: OPAQUE,
        (convert.__name__, "to_fp32"): lambda x: OPAQUE,
        (hopper_matmul.__name__, "post_partial"): lambda ws, flags, q, acc, layout: tr.coords.append(
            (tr.current, "post", "ws_ptr", (_known(q, "a workspace slot"),))),
        (hopper_matmul.__name__, "add_partial"): lambda ws, flags, q, acc, layout: tr.coords.append(
            (tr.current, "gather", "ws_ptr", (_known(q, "a workspace slot"),))) or OPAQUE,
    }
    return {"gl": gl, "mbarrier": mbarrier, "tma": tma, "hopper": hopper, "fence_async_shared": lambda *a, **k: rec("~fence"),
            "scope": Scope, "CachePolicy": OPAQUE, "FractionalEvictionPolicy": OPAQUE, **blackwell,
            "_helpers": helpers}


# ------------------------------------------------------------------ running a jit function's Python

def _python(jit, tr: Tracer, names: dict, cache: dict):
    """The plain-Python function behind a ``@gluon.jit`` function, with its module's Gluon names replaced."""
    fn = getattr(jit, "fn", jit)
    key = (fn.__module__, fn.__name__)
    if key in names["_helpers"]:
        return names["_helpers"][key]
    if id(fn) in cache:
        return cache[id(fn)]
    g = dict(fn.__globals__)
    for k, v in list(g.items()):
        if k in names and k != "_helpers":
            g[k] = names[k]
        elif hasattr(v, "fn") and hasattr(v, "arg_names"):            # another jit function: traced too
            g[k] = _Lazy(v, tr, names, cache)
        elif isinstance(v, type) and getattr(v, "__triton_aggregate__", False):
            g[k] = _aggregate(v, tr, names, cache)
        elif isinstance(v, _constexpr):
            g[k] = v.value
    out = types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, fn.__closure__)
    cache[id(fn)] = out
    return out


class _Lazy:
    def __init__(self, jit, tr, names, cache):
        self.jit, self.tr, self.names, self.cache = jit, tr, names, cache
        self.__name__ = getattr(jit.fn, "__name__", "fn")

    def __call__(self, *args, **kwargs):
        return _python(self.jit, self.tr, self.names, self.cache)(*args, **kwargs)


def _aggregate(cls, tr, names, cache):
    """A ``@gluon.aggregate`` class as a plain one: its fields by position or name, its jit methods traced."""
    fields = list(cls.__annotations__)
    methods = {k: v for k, v in vars(cls).items() if hasattr(v, "fn") and hasattr(v, "arg_names")}

    class Plain:
        def __init__(self, *args, **kwargs):
            for k, v in zip(fields, args):
                setattr(self, k, v)
            for k, v in kwargs.items():
                setattr(self, k, v)

    for k, v in methods.items():
        setattr(Plain, k, (lambda jit: lambda self, *a, **kw: _python(jit, tr, names, cache)(self, *a, **kw))(v))
    Plain.__name__ = cls.__name__
    return Plain


# ------------------------------------------------------------------ the tie

def kernel_arguments(protocol: Protocol, fn=None) -> tuple:
    """(jit function, {argument: value}) of the protocol's kernel: the catalog spec's constexprs, TMA descriptors
    from its signature, the protocol's ``runtime`` sizes, and an opaque value for the rest (pointers, scalars)."""
    if protocol.kernel is None or getattr(protocol, "runtime", None) is None:
        raise ValueError(f"{protocol.name} has no kernel and runtime sizes to trace")
    name, params, _ = protocol.kernel
    spec = catalog.spec(name, **params)
    args = {}
    for arg, kind in spec.signature.items():
        if arg in protocol.runtime:
            args[arg] = protocol.runtime[arg]
        elif arg in spec.constexprs:
            args[arg] = spec.constexprs[arg]
        elif isinstance(kind, str) and kind.startswith("tensordesc<"):
            args[arg] = Descriptor(kind, arg)
        else:
            args[arg] = OPAQUE
    return fn or spec.fn, args


def run(protocol: Protocol, cta: int = 0, fn=None, everything: bool = True) -> dict:
    """{partition: [kind, ...]}: what CTA ``cta`` of the protocol's kernel does, op by op, run on the CPU
    (``fn``: the jit function to run instead of the catalog's, e.g. a mutant). With ``everything=False`` only the
    kinds a model has; else also, marked ``~``, the fences, CTA barriers, the generic proxy's shared-memory
    accesses and the async proxy's reads (what :data:`RULES` read)."""
    tr = _trace(protocol, cta, fn)
    return tr.partitions if everything else {k: _visible(v) for k, v in tr.partitions.items()}


def _trace(protocol: Protocol, cta: int, fn=None, program: int = 0) -> Tracer:
    """The protocol's kernel run on the CPU for CTA ``cta`` of program ``program``: its Tracer, filled."""
    fn, args = kernel_arguments(protocol, fn)
    tr = Tracer(protocol.num_ctas, cta, protocol.runtime.get("_grid", 1), protocol.runtime.get("_clc_tiles", ()),
                program)
    _python(fn, tr, _builtins(tr), {})(**args)
    return tr


def tma_coordinates(protocol: Protocol, program: int = 0, cta: int = 0, fn=None) -> list:
    """[(partition, "load" or "store", descriptor argument, coordinate)]: every TMA copy program ``program`` of the
    protocol's grid (``runtime["_grid"]`` programs) issues from CTA ``cta``, in order, where its coordinate is
    known on the CPU (computed from sizes and program ids, not from tensors): which tiles and K steps a
    program walks, and where its results go."""
    return _trace(protocol, cta, fn, program).coords


def hopper_matmul_walk(config: dict, M: int, N: int, K: int, grid: int) -> list[list[dict]]:
    """What each of ``grid`` programs of ``hopper_matmul_kernel`` (options ``config``) walks at M x N x K, from the
    kernel's own program run on the CPU (:func:`tma_coordinates`): per program, its work units in order,
    each ``{"a": [(row, col) of every A load], "b": [(row, col) of every B load], "stores": [(row, col) of the
    epilogue's stores]}``, the stores those of the consumer whose turn the unit is (consumers take turns). Stores
    that no unit accounts for come last, as a unit without loads."""
    p = hopper_matmul.plan(M, N, K, DTYPES["float16"].gl, **config)
    proto = models.hopper_matmul(num_ctas=p.num_ctas, consumers=p.consumers)
    proto.kernel = ("hopper_matmul", dict(config), "sm_90a")
    proto.runtime = {"M": M, "N": N, "K": K, "_grid": grid}
    steps = -(-K // p.block_k) // p.split_k                 # K steps a unit
    walk = []
    for prog in range(grid):
        ops = tma_coordinates(proto, prog)
        a = [c for _, _, d, c in ops if d == "a_desc"]
        b = [c for _, _, d, c in ops if d == "b_desc"]
        who = sorted({part for part, op, _, _ in ops if op == "store"})
        stores = [[c for part, op, _, c in ops if op == "store" and part == w] for w in who]
        units = []
        for j in range(-(-len(a) // steps)):
            mine = stores[j % len(who)][j // len(who) * p.split:][:p.split] if who else []
            units.append({"a": a[j * steps:(j + 1) * steps], "b": b[j * steps:(j + 1) * steps], "stores": mine})
        left = [c for w in stores for c in w][sum(len(u["stores"]) for u in units):]
        if left:                                            # stores no unit accounts for: a unit without loads
            units.append({"a": [], "b": [], "stores": left})
        walk.append(units)
    return walk


def stream_k_walk(config: dict, M: int, N: int, K: int, grid: int) -> list[dict]:
    """What each program of ``stream_k_matmul_kernel`` (options ``config``, with ``stream_k=True``; at most
    ``grid`` programs, as ``stream_k_grid`` sizes the grid) does at M x N x K, from the kernel's own program run on the CPU: per program, ``{"loads": [(row, col, k)],
    "consumer": [...]}``, the (A row, B column, K step) of each step its producer loads, in order, and what its
    consumer does in order: ``("post", q)`` (hands a partial to slot q), ``("gather", q)`` (adds slot q's) and
    ``("store", row, col)`` (each store of its epilogue)."""
    p = hopper_matmul.plan(M, N, K, DTYPES["float16"].gl, **config)
    if not p.stream_k:
        raise ValueError("stream_k_walk walks the stream-K kernel: give config stream_k=True")
    proto = models.hopper_matmul(num_ctas=1, consumers=1)
    proto.kernel = ("hopper_matmul", dict(config), "sm_90a")
    steps = -(-M // p.tile_m) * -(-N // p.block_n) * -(-K // p.block_k)
    grid, per = hopper_matmul.stream_k_grid(steps, grid, None)       # as prepare() sizes it: no empty program
    proto.runtime = {"M": M, "N": N, "K": K, "per": per, "_grid": grid}
    walk = []
    for prog in range(grid):
        a, loads, consumer = [], [], []
        for _, op, desc, c in tma_coordinates(proto, prog):
            if desc == "a_desc":
                a.append(c)
            elif desc == "b_desc":
                (row, ak), (_, col) = a[-1], c
                loads.append((row, col, ak // p.block_k))
            elif op in ("post", "gather"):
                consumer.append((op, c[0]))
            elif op == "store":
                consumer.append(("store", *c))
        walk.append({"loads": loads, "consumer": consumer})
    return walk


def _same(model_kind: str, kind: str) -> bool:
    """A program's ``arrive`` (Gluon's own on a barrier of one CTA or a group, which the program does not resolve)
    matches a model arrive reaching any CTA; every other kind must be equal."""
    return model_kind == kind or (kind == "arrive" and model_kind.startswith("arrive"))


RULES = {   # what the PTX memory model asks of a CTA's own accesses, which the protocol models do not follow
    "cta barrier": (("~generic write", "~generic read"), ("~cta barrier", "cluster_barrier"), "~release",
                    "release_arrive (thread 0) releases shared-memory accesses of the whole CTA with no gl.barrier() "
                    "before it: the other threads' accesses are not ordered before the release (PTX ISA, Memory "
                    "Consistency Model: causality order, release patterns; bar.sync)"),
}
# No rule for the proxy fence (fence_async_shared between a generic-proxy write and an async-proxy read): Triton 3.9's
# proxy-fence pass (add_proxy_fence_insertion in make_llir) inserts fence.proxy.async itself where a kernel leaves it
# out, so a kernel without one is not wrong, and a rule on the source would call it so.


def rule_problems(seq) -> list:
    """[(op index, rule, what)] where one partition's program breaks a rule of :data:`RULES`: an access, then the
    operation that publishes it, with no ordering operation between."""
    out = []
    for name, (access, order, use, what) in RULES.items():
        access = (access,) if isinstance(access, str) else access
        order = (order,) if isinstance(order, str) else order
        pending = None
        for i, k in enumerate(seq):
            if k in access:
                pending = i
            elif k in order:
                pending = None
            elif k == use and pending is not None:
                out.append((i, name, what))
                pending = None
    return out


def _visible(seq):
    return [k for k in seq if not k.startswith("~")]


def _runs(seq):
    """``seq`` with each run of reads (or of writes) made one (a model reads a buffer slot by slot where the
    kernel reads it in one load, and the other way round) and each run of TMA loads sorted (loads onto one barrier
    complete its phase in either order)."""
    out = []
    for k in seq:
        if out and k in ("read", "write") and out[-1] == k:
            continue
        out.append(k)
    i = 0
    while i < len(out):
        j = i
        while j < len(out) and out[j].startswith("tma_load"):
            j += 1
        out[i:j] = sorted(out[i:j])
        i = j + 1
    return out


def _equal(model, got):
    return len(model) == len(got) and all(_same(a, b) for a, b in zip(model, got))


def tie(protocol: Protocol, fn=None, ctas=(0,)) -> list:
    """The tie by program: every (CTA, partition) of the kernel's program must perform exactly the barrier
    operations of some partition of the same CTA in the model, in order, parities included. Returns
    [(cta, partition, first difference)] ([] when they agree). CTA 0 by default: it leads every barrier group, so
    its program has every operation; in another CTA a model keeps the no-op of a wait on a barrier it does not
    lead, where the kernel's predicate skips it."""
    bad = []
    for cta in ctas:
        model = {k: _runs(v) for k, v in model_sequences(protocol, cta, data=True).items()}
        full = run(protocol, cta, fn)
        for part, seq in full.items():
            bad += [(cta, part, f"op {i}: {what}") for i, rule, what in rule_problems(seq)]
        got = {k: _runs(_visible(v)) for k, v in full.items()}
        free = dict(model)
        for part, seq in got.items():
            match = next((k for k, v in free.items() if _equal(v, seq)), None)
            if match is not None:
                del free[match]
                continue
            bad.append((cta, part, _first_difference(free or model, seq)))
        for k, v in free.items():
            if v and not any(_equal(v, s) for s in got.values()):
                bad.append((cta, k, f"the model's {k} does {len(v)} operations the kernel never does"))
                break
    return bad


def _first_difference(model: dict, seq: list) -> str:
    best, where = None, -1
    for k, v in model.items():
        i = next((j for j, (a, b) in enumerate(zip(v, seq)) if not _same(a, b)), min(len(v), len(seq)))
        if i > where:
            best, where = (k, v), i
    k, v = best
    mine = seq[where] if where < len(seq) else "(end)"
    theirs = v[where] if where < len(v) else "(end)"
    return f"op {where}: the kernel does {mine}, the model's {k} does {theirs}"
