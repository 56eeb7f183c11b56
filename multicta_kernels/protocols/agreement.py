"""Model and code agree: each protocol's code sites and init counts against the compiled PTX of its kernel,
and the shared-memory allocation the models' ``over=`` follow, read from Triton's own allocation pass."""
from __future__ import annotations

import math
import re

from .. import catalog, lens
from .language import Protocol


CENSUS = {   # kind: what it is in the PTX
    "init": "mbarrier.init (one per barrier)",
    "arrive": "mbarrier.arrive (not expect_tx, not a cluster-barrier hand-shake)",
    "expect": "mbarrier.arrive.expect_tx",
    "wait": "mbarrier.try_wait (not a cluster-barrier hand-shake)",
    "commit": "tcgen05.commit (one per mbarrier of a tcgen05_mma)",
    "try_cancel": "clusterlaunchcontrol.try_cancel",
    "tma_load": "cp.async.bulk.tensor ... complete_tx (one per async_load; a box split in several copies is one)",
    "tma_store": "cp.async.bulk.commit_group (one per async_store)",
    "store_wait": "cp.async.bulk.wait_group",
    "cluster_barrier": "barrier.cluster.arrive (in a partition: mbarrier.arrive.release.cluster, a hand-shake)",
    "invalidate": "mbarrier.inval (one per barrier retired)",
    "st_async": "st.async ... mbarrier::complete_tx (one per async_store of registers to peers)",
}
_CENSUS_OF = {"arrive": "arrive", "expect": "expect", "wait": "wait", "mma": "commit", "try_cancel": "try_cancel",
              "tma_load": "tma_load", "tma_store": "tma_store", "store_wait": "store_wait",
              "cluster_arrive": "cluster_barrier", "invalidate": "invalidate", "st_async": "st_async"}


def sites(protocol: Protocol) -> dict:
    """The model's code sites per census kind (a site counts once however many CTAs or iterations run
    it), and ``init_counts``: every barrier's initial count, as its leader holds it."""
    per = {}
    for t in protocol.threads:
        for op in t.ops:
            kind = _CENSUS_OF.get(op.kind)
            if kind:
                per[(kind, op.site)] = max(per.get((kind, op.site), 0), op.census)
    out = dict.fromkeys(CENSUS, 0)
    for (kind, _), n in per.items():
        out[kind] += n
    out["init_counts"] = sorted(b.count * b.layout.group_size for b in protocol.barriers for _ in range(b.slots))
    out["init"] = len(out["init_counts"])
    return out


def ptx_census(ptx: str) -> dict:
    """The same kinds, counted in PTX (``hand_shakes`` and ``hand_shake_waits``: arrives and waits at cluster
    scope, the lowering of a cluster barrier inside a partition, or chapter 2's ``release_arrive`` /
    ``acquire_wait``; ``cluster_barriers``: aligned ``barrier.cluster.arrive``, the compiler's own included)."""
    out = dict.fromkeys(CENSUS, 0)
    out.update(hand_shakes=0, hand_shake_waits=0, cluster_barriers=0)
    out["init_counts"] = sorted(lens.mbarrier_init_counts(ptx))
    out["init"] = len(out["init_counts"])
    load = None                                  # the copies of one load share its predicate and barrier
    for _, _, line in lens.instructions(ptx):
        if "cp.async.bulk.tensor" in line and "complete_tx" in line:
            key = (line.split()[0], line.rsplit("[", 1)[-1])
            out["tma_load"] += key != load
            load = key
            continue
        kind = next((k for pattern, k in _PTX_KINDS if all(x in line for x in pattern)
                     and not any(x in line for x in _PTX_NOT.get(k, ()))), None)
        if kind:
            out[kind] += 1
            load = None
    return out


_PTX_KINDS = [(("mbarrier.arrive.release.cluster",), "hand_shakes"), (("mbarrier.arrive.expect_tx",), "expect"),
              (("mbarrier.try_wait", "acquire.cluster"), "hand_shake_waits"),
              (("mbarrier.arrive",), "arrive"), (("mbarrier.try_wait",), "wait"), (("tcgen05.commit",), "commit"),
              (("clusterlaunchcontrol.try_cancel",), "try_cancel"), (("cp.async.bulk.commit_group",), "tma_store"),
              (("cp.async.bulk.wait_group",), "store_wait"), (("barrier.cluster.arrive",), "cluster_barriers"),
              (("mbarrier.inval",), "invalidate"), (("st.async", "complete_tx"), "st_async")]
_PTX_NOT = {"wait": ("acquire.cluster",), "cluster_barriers": ("relaxed",)}


def compare(protocol: Protocol, ptx: str | None = None) -> list:
    """Rows [kind, model, PTX, equal] comparing the model's code sites with the compiled kernel
    (``ptx`` defaults to ``catalog.compile`` of ``protocol.kernel``). What the compiler adds on its own
    goes on the model's side: its cluster barriers, and for a cluster barrier inside a partition the
    two hand-shake mbarriers (count C - 1, used in turn) it allocates."""
    if ptx is None:
        if protocol.kernel is None:
            raise ValueError(f"{protocol.name} models no single kernel: nothing to compare")
        name, params, target = protocol.kernel
        ptx = catalog.compile(name, target, **params).ptx
    want, got = sites(protocol), ptx_census(ptx)
    if protocol.warp_specialized:
        got["cluster_barrier"] = got["hand_shakes"]
        if want["cluster_barrier"]:
            want["init_counts"] = sorted(want["init_counts"] + [protocol.num_ctas - 1] * 2)
            want["init"] += 2
    else:                          # cluster-scoped arrives and waits are the kernel's own (chapter 2's data hand-off)
        got["cluster_barrier"] = got["cluster_barriers"] - protocol.compiler_cluster_barriers
        got["arrive"] += got["hand_shakes"]
        got["wait"] += got["hand_shake_waits"]
    for kind, n in protocol.ptx_merges.items():
        want[kind] -= n
    rows = [[k, want[k], got[k], want[k] == got[k]] for k in CENSUS]
    rows.insert(1, ["init counts", want["init_counts"], got["init_counts"], want["init_counts"] == got["init_counts"]])
    return rows


def try_waits(ptx: str) -> list:
    """(PTX line, loop depth, source) of every ``mbarrier.try_wait`` that is not a cluster hand-shake. The
    depth is LLVM's own, from its block comments ("Loop Header: Depth=2", "in Loop: ... Depth=1"): in a
    warp-specialised kernel the worker partitions run inside a dispatch loop (depth 1), so a partition's own
    loop is depth 2 and a wait after it is back at depth 1. The source is the ``file.py:line`` of the .loc
    before the wait's inline-asm block (the .loc lines inside it belong to the wait loop)."""
    out, depth, src = [], 0, None
    lines = ptx.splitlines()
    for i, ln in enumerate(lines):
        if re.match(r"(\$L__BB\d+_\d+:|// %bb\.\d+:)", ln):
            comments = [ln] + [x for x in lines[i + 1:i + 6] if x.strip().startswith("//")
                               and not re.match(r"\s*// %bb", x)]
            found = [int(m.group(1)) for x in comments for m in [re.search(r"Depth=(\d+)", x)] if m]
            depth = max(found) if found else 0
        if "// begin inline asm" in ln:
            loc = next((x for x in reversed(lines[max(0, i - 6):i]) if x.strip().startswith(".loc")), "")
            m = re.search(r"//\s*(\S+\.py:\d+)", loc)
            src = m.group(1) if m else None
        if "mbarrier.try_wait" in ln and "acquire.cluster" not in ln:
            out.append((i + 1, depth, src))
    return out


def allocation(compiled: lens.Compiled) -> dict:
    """Triton's own shared-memory allocation of a compiled kernel: {buffer: (offset, bytes per CTA)} for
    every ``ttg.local_alloc`` (named by its Python variable; barriers ``allocate_mbarrier`` makes are
    ``bar``, ``bar_0``, ...). It runs the allocation pass of Triton's ``make_llir`` on the kernel's TTGIR,
    so what shares bytes with what is read, not guessed (the models' ``over=`` follow it)."""
    import tempfile
    from pathlib import Path
    from triton._C.libtriton import ir, nvidia, passes
    ctx = ir.context()
    ir.load_dialects(ctx)
    nvidia.load_dialects(ctx)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "kernel.ttgir"
        path.write_text(compiled.ttgir)
        mod = ir.parse_mlir_module(str(path), ctx)
    pm = ir.pass_manager(ctx)
    passes.ttgpuir.add_allocate_warp_groups(pm, False)
    passes.convert.add_scf_to_cf(pm)
    passes.gluon.add_inliner(pm)
    capability = int(compiled.target.split("_")[1].rstrip("a"))
    nvidia.passes.ttgpuir.add_allocate_shared_memory_nv(pm, capability, 88)
    pm.run(mod, "allocation")
    text = str(mod)
    attrs = dict(re.findall(r"^(#shared\d*) = (.*)$", text, re.M))
    out = {}
    for name, offset, shape, elem, attr in re.findall(
            r"%(\w+) = ttg\.local_alloc\s*\{allocation\.offset = (\d+) : i32\}.*?"
            r"memdesc<([\dx]+)x(f16|bf16|f32|i64|i32|i8), (#shared\d*)", text):
        bases = re.search(r"CGALayout = \[(.*?)\]\}", attrs[attr])
        split = sum(1 for b in re.findall(r"\[([^\[\]]*)\]", bases.group(1)) if any(int(x) for x in b.split(","))) \
            if bases else 0
        size = math.prod(int(x) for x in shape.split("x")) * {"f16": 2, "bf16": 2, "f32": 4, "i64": 8, "i32": 4,
                                                                "i8": 1}[elem]
        out[name] = (int(offset), size >> split)
    return out


# ------------------------------------------------------------------ the tie by order

_ORDER_KIND = {"arrive": "arrive", "expect": "expect", "wait": "wait", "mma": "commit", "try_cancel": "try_cancel",
               "tma_load": "tma_load", "tma_store": "tma_store", "store_wait": "store_wait",
               "cluster_arrive": "cluster_barrier", "invalidate": "invalidate", "st_async": "st_async"}


def model_sequences(protocol: Protocol, cta: int = 0, data: bool = False) -> dict:
    """{partition: [kind, ...]}: the barrier operations of CTA ``cta``'s threads in program order (loops unrolled, as
    the model is built), each op repeated as many times as the code sites it stands for (a load of A and B: two). A
    wait is ``wait=0`` or ``wait=1``: the parity it passes; an arrive ``arrive@FIRSTxN``: the N consecutive CTAs
    from FIRST whose barrier it reaches. ``data``: the reads and writes of shared memory too (``read``, ``write``:
    one each), the wgmmas and their waits (``wgmma``, ``wgmma_wait(n)``), and each TMA load and each MMA commit as
    ``tma_load>N`` / ``commit>N``, N the CTAs it lands in, as :func:`protocols.program.tie` compares
    them."""
    out = {}
    for t in protocol.threads:
        if t.cta != cta:
            continue
        seq = out.setdefault(t.partition, [])
        for op in t.ops:
            if op.registers:                               # not shared memory: the program sees only the load
                continue
            kind = _ORDER_KIND.get(op.kind) or (op.kind if data and op.kind in ("read", "write", "wgmma") else None)
            if data and op.kind == "wgmma_wait":
                kind = f"wgmma_wait({op.n})"
            if kind == "wait" and isinstance(op.parity, int):
                kind = f"wait={op.parity & 1}"             # the parity the kernel passes: see ptx_segments
            elif kind == "arrive" and op.targets:          # the CTAs it reaches, as release_arrive's lanes do
                kind = f"arrive@{min(op.targets)}x{len(op.targets)}"
                if sorted(op.targets) != list(range(min(op.targets), min(op.targets) + len(op.targets))):
                    kind += f"{sorted(op.targets)}"        # lanes reach consecutive CTAs only: no PTX matches it
            if kind in ("tma_load", "commit") and data and op.reach:   # how many CTAs each lands in (the program's view)
                seq += [f"{kind}>{n}" for n in op.reach]
            elif kind:
                seq += [kind] * op.census
    return out


def ptx_segments(ptx: str, warp_specialized: bool = False) -> list:
    """The PTX's barrier operations cut into straight pieces: [(where, [kind, ...], looped)], where a piece runs between two
    loop boundaries (a loop's header or its backward branch, a partition's entry from the dispatch jump table, an
    unconditional branch, an exit). Each piece is what one turn of a loop body (or the code before, between and after the loops) does in
    order, so the model must do it in that order somewhere: see :func:`order`. ``looped``: the piece lies in a loop
    of the kernel (not only in the dispatch loop of a warp-specialised kernel)."""
    lines = ptx.splitlines()
    spans = [lp for lp in lens.loops(ptx) if not lp.dispatch]
    cuts = {lp.start for lp in spans} | {lp.end + 1 for lp in spans}
    labels = {m.group(1): i + 1 for i, ln in enumerate(lines) if (m := re.match(r"(\$L__BB\d+_\d+):", ln))}
    for ln in lines:                                 # a jump table's targets: where each partition starts
        if "brx.idx" in ln or ln.strip().startswith(("$L_brx", ".branchtargets")) or "branchtargets" in ln:
            cuts |= {labels[x] for x in re.findall(r"\$L__BB\d+_\d+", ln) if x in labels}
    for no, op, _ in lens.instructions(ptx):
        if op in ("ret", "exit", "trap") or op.startswith("brx.idx") or \
                op.startswith("bra") and not lines[no - 1].strip().startswith("@"):    # no fall-through past it
            cuts.add(no + 1)
    pieces, current, start, load = [], [], 1, None
    constants = _constants(ptx)

    def _lanes(lines, no):
        """``arrive@FIRSTxN`` for release_arrive's block (``setp.lt.and.u32 p, t, N, ...``, ``add.u32 peer, FIRST, t``)
        when both are constants, else ``arrive``."""
        block = "\n".join(lines[max(0, no - 8):no])
        n = re.search(r"setp\.lt\.and\.u32\s+p,\s*t,\s*([^,\s]+),", block)
        first = re.search(r"add\.u32\s+peer,\s*([^,\s]+),\s*t;", block)
        n = _immediate(n.group(1), constants) if n else None
        first = _immediate(first.group(1), constants) if first else None
        return f"arrive@{first}x{n}" if n is not None and first is not None else "arrive"

    for no, _, line in lens.instructions(ptx):
        if any(start < c <= no for c in cuts):
            if current:
                pieces.append((start, current, any(start in lp for lp in spans)))
            current, start, load = [], no, None
        if "cp.async.bulk.tensor" in line and "complete_tx" in line:
            key = (line.split()[0], line.rsplit("[", 1)[-1])
            if key != load:
                current.append("tma_load")
            load = key
            continue
        kind = next((k for pattern, k in _PTX_KINDS if all(x in line for x in pattern)
                     and not any(x in line for x in _PTX_NOT.get(k, ()))), None)
        if kind:
            load = None
        if kind == "hand_shakes" and not warp_specialized:          # release_arrive: lanes from a first CTA
            kind = _lanes(lines, no)
        elif kind in ("hand_shakes", "cluster_barriers"):
            kind = "cluster_barrier" if (kind == "hand_shakes") == warp_specialized else \
                ("arrive" if kind == "hand_shakes" else "cluster_barrier")
        elif kind == "hand_shake_waits":
            kind = None if warp_specialized else "wait"
        if kind == "wait" and (m := re.search(r"try_wait\.parity\S*\s+[^,]+,\s*\[[^\]]+\],\s*([^;\s]+)", line)):
            parity = _immediate(m.group(1), constants)
            if parity in (0, 1):
                kind = f"wait={parity}"
        if kind:
            current.append(kind)
    if current:
        pieces.append((start, current, any(start in lp for lp in spans)))
    return pieces


def _constants(ptx: str) -> dict:
    """{register: value} of the registers the PTX defines once, by a ``mov`` of an immediate (a constant parity)."""
    defs, value = {}, {}
    for _, op, line in lens.instructions(ptx):
        text = line.strip().split(None, 1)[1] if line.strip().startswith("@") else line.strip()
        parts = text.rstrip(";").split(None, 1)
        if len(parts) < 2:
            continue
        dest = parts[1].split(",", 1)[0].strip()
        if not dest.startswith("%"):
            continue
        defs[dest] = defs.get(dest, 0) + 1
        m = re.fullmatch(r"mov\.[bsu]32", op) and re.fullmatch(r"%\w+,\s*(-?\d+)", parts[1].strip())
        if m:
            value[dest] = int(m.group(1))
    return {r: v for r, v in value.items() if defs[r] == 1}


def _immediate(operand: str, constants: dict):
    """The value of a parity operand: an immediate, a register of ``constants``, else None (computed at run time)."""
    operand = operand.strip()
    if re.fullmatch(r"-?\d+", operand):
        return int(operand)
    return constants.get(operand)


def _same(model_kind: str, ptx_kind: str) -> bool:
    """A PTX wait whose parity is computed at run time ("wait") matches a model wait of either parity; an arrive whose
    targets the PTX does not spell as constants ("arrive": Gluon's own, or release_arrive to a computed CTA) matches
    a model arrive reaching any."""
    return model_kind == ptx_kind or (ptx_kind == "wait" and model_kind.startswith("wait=")) or \
        (ptx_kind == "arrive" and model_kind.startswith("arrive"))


def _contains(seq: list, piece: list) -> bool:
    n = len(piece)
    return any(all(_same(a, b) for a, b in zip(seq[i:i + n], piece)) for i in range(len(seq) - n + 1))


def order(protocol: Protocol, ptx: str | None = None) -> list:
    """The tie by order: every straight piece of the kernel's PTX (:func:`ptx_segments`: a loop body's turn, or the
    code before, between or after loops) must occur, in that order and contiguously, in the program of some
    partition of CTA 0 in the model. Returns the pieces that do not, as (PTX line, [kind, ...]) ([] when model and
    kernel agree). A release moved after the reload is a piece wait, expect, tma_load, release that no turn of the
    model's loop has; :func:`compare` (counts) cannot see it. The compiler's own cluster barriers (kernel exit,
    after the inits) are dropped from the PTX's pieces as :func:`compare` drops them."""
    if ptx is None:
        if protocol.kernel is None:
            raise ValueError(f"{protocol.name} models no single kernel: nothing to compare")
        name, params, target = protocol.kernel
        ptx = catalog.compile(name, target, **params).ptx
    seqs = model_sequences(protocol)
    bad = []
    for where, piece, looped in ptx_segments(ptx, protocol.warp_specialized):
        if not looped:
            piece = _without_compiler_barriers(piece, seqs)
        if piece and not any(_contains(s, piece) for s in seqs.values()):
            bad.append((where, piece))
    return bad


def _without_compiler_barriers(piece, seqs):
    """A piece outside the loops with the cluster barriers that the model does not have at that place removed: the
    compiler's own (at exit, around the partitions) are not in the model; a piece whose barriers the model has keeps
    them. In a loop a cluster barrier is always the kernel's (a release), and stays."""
    if "cluster_barrier" not in piece or any(_contains(s, piece) for s in seqs.values()):
        return piece
    return [k for k in piece if k != "cluster_barrier"]


def store_wait_depths(protocol: Protocol, ptx: str | None = None) -> tuple:
    """(model, PTX): the set of ``n`` of every ``tma.store_wait(n)`` site, in the model and in the PTX's
    ``cp.async.bulk.wait_group.read n``: how many stores may still be reading their staging buffers. A census of
    sites cannot see a buffer reused one store early (``store_wait(0)`` become ``store_wait(1)``); this can."""
    if ptx is None:
        name, params, target = protocol.kernel
        ptx = catalog.compile(name, target, **params).ptx
    model = {op.n for t in protocol.threads for op in t.ops if op.kind == "store_wait"}
    got = {int(m.group(1)) for _, _, line in lens.instructions(ptx)
           if (m := re.search(r"cp\.async\.bulk\.wait_group(?:\.read)?\s+(\d+)", line))}
    return model, got
