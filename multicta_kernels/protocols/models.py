"""The book's protocols: one builder per kernel, written against the kernel's source.

The same loops, the same index and phase arithmetic (``phase`` is what a wait or an arrival is meant for,
``parity`` what the code passes), the same constants imported from the kernel modules. ``site=`` names a
code site where one source line is several (a ``static_range``, or a constexpr-bounded loop the compiler
unrolls). The builders are named after the kernels they model: ``protocols.models.ping_pong(...)``.
"""
from __future__ import annotations

from .. import barriers as ch2
from .. import clc_matmul as ch5
from .. import hopper_matmul as ch6
from .. import multicast as ch3
from .. import primer
from .. import softmax as ch1
from .. import two_cta as ch4
from .. import wide_tiles as ch6w
from ..core import validate
from ..core.dtypes import DTYPES
from ..core.hardware import log2
from ..gluon import operands, ring
from .language import MAX_OPS, Protocol, all_ctas, commit_count, commit_targets


# ------------------------------------------------------------------ the Gluon primer (Part 0)

def _primer_tile_bytes(dtype: str = "float16") -> int:
    return primer.TMA_BLOCK[0] * primer.TMA_BLOCK[1] * DTYPES[dtype].bytes


def tma_ring(tiles: int = 4, stages: int = primer.STAGES, flip: bool = True) -> Protocol:
    """The primer's ``tma_ring_kernel``: one thread,
    ``stages`` ready barriers, a TMA store through one staging buffer. ``flip=False`` is the bug of
    a parity that never flips (every wait on parity 0)."""
    nbytes = _primer_tile_bytes()
    p = Protocol(f"primer TMA ring, {stages} stages, {tiles} tiles"
                 + ("" if flip else ", parity never flips"), 1,
                 ("primer_tma_ring", {"stages": stages}, "sm_90a"))
    p.runtime = {"num_tiles": tiles, "tiles_n": 1}
    ready = p.barrier("ready", stages)
    t = p.thread(0, "main")
    for s in range(min(stages, tiles)):                          # the prologue (static_range)
        t.expect(ready[s], nbytes, 0, site=f"expect ready[{s}]")
        t.tma_load(ready[s], [("bufs", s, 1, [], nbytes)], 0, site=f"tma_load bufs[{s}]")
    for i in range(tiles):
        slot, lap = i % stages, i // stages
        t.wait(ready[slot], lap, parity=lap & 1 if flip else 0)
        t.read("bufs", slot, lap + 1)
        if i + stages < tiles:
            t.expect(ready[slot], nbytes, lap + 1)
            t.tma_load(ready[slot], [("bufs", slot, lap + 2, [], nbytes)], lap + 1)
        t.store_wait(0)
        t.write("out", 0, i + 1)
        t.tma_store("out", 0, i + 1)
    t.store_wait(0, site="store_wait after the loop")
    for s in range(stages):                                      # retired (static_range): one mbarrier.inval each
        t.invalidate(ready[s], site=f"invalidate ready[{s}]")
    return p


def ws_ring(tiles: int = 4, stages: int = primer.STAGES, producer_flips: bool = True,
            free: str = "after") -> Protocol:
    """The primer's ``ws_scale_kernel``: the loading warp and the computing warps, ``ready`` and
    ``empty``. ``producer_flips=False``: the producer waits on ``empty`` with ``phase``, not
    ``phase ^ 1`` (on a fresh barrier that waits for a release nobody has made). ``free``: the
    consumer arrives on ``empty`` "after" reading the slot (the kernel), "before", or "never"."""
    if free not in ("after", "before", "never"):
        raise ValueError(f"free must be 'after', 'before' or 'never', got {free!r}")
    nbytes = _primer_tile_bytes()
    name = ("primer warp-specialised ring" + ("" if producer_flips else ", producer waits on phase")
            + ("" if free == "after" else f", consumer frees {free}"))
    p = Protocol(name, 1, ("primer_ws_scale", {"stages": stages}, "sm_90a"), warp_specialized=True)
    p.runtime = {"num_tiles": tiles, "tiles_n": 1}
    ready, empty = p.barrier("ready", stages), p.barrier("empty", stages)
    load, compute = p.thread(0, "load"), p.thread(0, "compute")
    for i in range(tiles):
        slot, lap = i % stages, i // stages
        # "phase lap - 1 of empty has completed": parity (lap & 1) ^ 1; a fresh barrier passes 1
        load.wait(empty[slot], lap - 1, parity=(lap & 1) ^ 1 if producer_flips else lap & 1)
        load.expect(ready[slot], nbytes, lap)
        load.tma_load(ready[slot], [("bufs", slot, lap + 1, [], nbytes)], lap)
        compute.wait(ready[slot], lap)
        if free == "before":
            compute.arrive(empty[slot], lap)
        compute.read("bufs", slot, lap + 1)
        if free == "after":
            compute.arrive(empty[slot], lap, frees=["bufs"])
        compute.store_wait(0)
        compute.write("out", 0, i + 1)
        compute.tma_store("out", 0, i + 1)
    compute.store_wait(0, site="store_wait after the loop")
    for s in range(stages):                          # after the partitions join, in the default (compute) partition
        compute.invalidate(ready[s], site=f"invalidate ready[{s}]")
        compute.invalidate(empty[s], site=f"invalidate empty[{s}]")
    return p


# ------------------------------------------------------------------ chapter 1

def softmax_one_round(num_ctas: int = 2) -> Protocol:
    """Chapter 1, ``softmax_one_round_kernel``: each CTA expects every source's (max, sum) pair of every row, stores
    its own pair into every CTA with ``st.async`` (bytes completing on the receiver's ``landed``), waits with
    acquire at cluster scope, reads all pairs from its own shared memory and retires ``landed``. Slot ``s`` of
    ``m_all`` / ``s_all`` is source CTA ``s``'s column (only CTA s writes it, in every CTA)."""
    part = ch1.softmax_one_round_spec(num_ctas).constexprs["BLOCK_M"] * 4   # one fp32 per row, per source
    p = Protocol(f"one-round softmax exchange, {num_ctas} CTAs", num_ctas,
                 ("softmax_one_round", {"num_ctas": num_ctas}, "sm_90a"), compiler_cluster_barriers=1)
    p.runtime = {"M": 1, "n_div": 1}
    landed = p.barrier("landed")                                           # one per CTA
    for c in range(num_ctas):
        t = p.thread(c, "main")
        t.expect(landed, 2 * part * num_ctas, 0)
        t.st_async(landed, "m_all", c, 1, part, range(num_ctas), 0, site="st_async m_all")
        t.st_async(landed, "s_all", c, 1, part, range(num_ctas), 0, site="st_async s_all")
        t.wait(landed, 0)
        for s in range(num_ctas):
            t.read("m_all", s, 1, site=f"read m_all[{s}]")
            t.read("s_all", s, 1, site=f"read s_all[{s}]")
        t.invalidate(landed)
    return p


def softmax_pipelined(num_ctas: int = 2, turns: int = 2, slots: int = 2) -> Protocol:
    """Chapter 1, ``softmax_pipelined_kernel``: one program (cluster) making ``turns`` turns of its loop, two row blocks
    a turn (the second exchanges even when it lies past M), block ``b`` through exchange slot ``b % 2``
    (``m_all``/``s_all`` or ``m_all1``/``s_all1``, barrier ``landed[b % 2]``), whose phase ``b // 2`` is waited with
    the parity the kernel flips once per turn. Each CTA is one thread here: the kernel's ``gl.barrier()`` before the
    stores is what makes a CTA's reads of a slot all come before its next block's stores (the model assumes it; the
    compiler's own bar.sync there is why dropping it is no bug in the PTX: chapter 1's mutation table). ``slots=1`` is
    the bug of one slot for every block: a peer that has this block's pairs refills the slot while a slower CTA still
    reads the last block's."""
    if slots not in (1, 2):
        raise ValueError(f"slots must be 1 (the bug) or 2 (the kernel), got {slots!r}")
    validate.count(turns, "turns", high=32)
    part = ch1.softmax_pipelined_spec(num_ctas).constexprs["BLOCK_M"] * 4   # one fp32 per row, per source
    p = Protocol(f"pipelined softmax exchange, {num_ctas} CTAs, {turns} turn(s)" + ("" if slots == 2 else ", one slot"),
                 num_ctas, ("softmax_pipelined", {"num_ctas": num_ctas}, "sm_90a"), compiler_cluster_barriers=1)
    p.runtime = {"M": 2 * turns * part // 4, "n_div": 1}      # one program: every block is its own
    landed = p.barrier("landed", 2)
    for c in range(num_ctas):
        t = p.thread(c, "main")
        for b in range(2 * turns):
            slot, lap = (b % 2, b // 2) if slots == 2 else (0, b)
            m_buf, s_buf = ("m_all", "s_all") if slot == 0 else ("m_all1", "s_all1")
            t.expect(landed[slot], 2 * part * num_ctas, lap, site=f"expect landed[{b % 2}]")
            t.st_async(landed[slot], m_buf, c, lap + 1, part, range(num_ctas), lap, site=f"st_async m slot {b % 2}")
            t.st_async(landed[slot], s_buf, c, lap + 1, part, range(num_ctas), lap, site=f"st_async s slot {b % 2}")
            t.wait(landed[slot], lap, parity=lap & 1, site=f"wait landed[{b % 2}]")
            for s in range(num_ctas):
                t.read(m_buf, s, lap + 1, site=f"read {m_buf}[{s}]")
                t.read(s_buf, s, lap + 1, site=f"read {s_buf}[{s}]")
        t.invalidate(landed[0], site="invalidate landed[0]")
        t.invalidate(landed[1], site="invalidate landed[1]")
    return p


def _exchange_row(t, landed, slot, lap, num_ctas, part=4):
    """One row's exchange of the staged and halves kernels, by CTA ``t.cta``: expect every source's pair on
    ``landed[slot]`` (phase ``lap``), store its own into every CTA (``st.async``, ``part`` bytes a value), wait, read
    every source's pair from its own copy of the slot."""
    m_buf, s_buf = f"m_all[{slot}]", f"s_all[{slot}]"
    t.expect(landed[slot], 2 * part * num_ctas, lap, site="expect landed[slot]")
    t.st_async(landed[slot], m_buf, t.cta, lap + 1, part, range(num_ctas), lap, site="st_async m_all[slot]")
    t.st_async(landed[slot], s_buf, t.cta, lap + 1, part, range(num_ctas), lap, site="st_async s_all[slot]")
    t.wait(landed[slot], lap, parity=lap & 1, site="wait landed[slot]")
    for s in range(num_ctas):
        t.read(m_buf, s, lap + 1, site=f"read {m_buf}[{s}]")
        t.read(s_buf, s, lap + 1, site=f"read {s_buf}[{s}]")


def softmax_staged(num_ctas: int = 2, rows: int = 3, slots: int = 2) -> Protocol:
    """Chapter 1, ``softmax_staged_kernel``: one program (cluster) walking ``rows`` rows. Each CTA's slice of row ``r``
    lands by TMA in its own ``stage`` (bytes counted on its own ``ready``, phase ``r``); the CTA reads it, then, if a
    row follows, expects and loads that one into the same buffer; row ``r``'s pairs go through exchange slot
    ``r % 2`` (barrier ``landed[r % 2]``, phase ``r // 2``, the parity flipping every second row). Each CTA is one
    thread here: the kernel's ``gl.barrier()`` after the stage read is what puts every warp's reads (of the stage
    and of the other slot) before the next TMA and the pairs it sends. The kernel indexes the slot at run time: one
    code site for both slots. ``slots=1`` is the bug of one exchange slot for every row (as the pipelined kernel's)."""
    if slots not in (1, 2):
        raise ValueError(f"slots must be 1 (the bug) or 2 (the kernel), got {slots!r}")
    validate.count(rows, "rows", high=32)
    spec = ch1.softmax_staged_spec(num_ctas)
    stage = spec.constexprs["BLOCK_N"] // num_ctas * 4                      # fp32: this CTA's slice of a row
    p = Protocol(f"staged softmax, {num_ctas} CTAs, {rows} row(s)" + ("" if slots == 2 else ", one slot"), num_ctas,
                 ("softmax_staged", {"num_ctas": num_ctas}, "sm_90a"), compiler_cluster_barriers=1)
    p.runtime = {"M": rows, "n_div": 1}                    # one program: every row is its own
    ready = p.barrier("ready")
    landed = p.barrier("landed", 2)
    for c in range(num_ctas):
        t = p.thread(c, "main")
        t.expect(ready, stage, 0, site="expect the first row")
        t.tma_load(ready, [("stage", 0, 1, [], stage)], 0, site="tma_load the first row")
        for r in range(rows):
            slot, lap = (r % 2, r // 2) if slots == 2 else (0, r)
            t.wait(ready, r, parity=r & 1, site="wait ready")
            t.read("stage", 0, r + 1, site="read stage")
            if r + 1 < rows:
                t.expect(ready, stage, r + 1, site="expect ready")
                t.tma_load(ready, [("stage", 0, r + 2, [], stage)], r + 1, site="tma_load stage")
            _exchange_row(t, landed, slot, lap, num_ctas)
        t.invalidate(ready, site="invalidate ready")
        t.invalidate(landed[0], site="invalidate landed[0]")
        t.invalidate(landed[1], site="invalidate landed[1]")
    return p


def softmax_halves(num_ctas: int = 2, rows: int = 3, slots: int = 2, early_load: bool = False,
                   early_ahead: bool = False) -> Protocol:
    """Chapter 1, ``softmax_halves_kernel``: one program (cluster) walking ``rows`` rows, each CTA's slice of a row in
    quarters. Quarter 0 of row ``r`` lands by TMA in ``ahead`` (phase ``r`` of barrier ``early``, version ``r + 1``);
    the CTA reads it into registers and, if a row follows, at once expects and loads that row's quarter 0 into the
    same buffer. Quarters 2 and 3 land by TMA in ``third`` and ``fourth`` (two boxes on phase ``r`` of ``ready``;
    each buffer modelled as its chunks, slot ``c`` for chunk ``c``, version ``2r + 1``); the CTA reads every chunk (the
    max), then reads each and writes exp(x - max) back in place (version ``2r + 2``), exchanges its pair through slot
    ``r % 2`` as the staged kernel does, reads every chunk again to store it and only then, if a row follows, expects
    and loads that row's quarters 2 and 3. (Quarter 1 is loaded into registers by ld.global: no barrier, no buffer.)
    Each CTA is one thread here: the kernel's ``gl.barrier()`` before each TMA is what puts every warp's reads before
    it (and before the next row's pairs). ``early_load=True`` is the bug of issuing the next row's quarters 2 and 3
    before the stores have read them; ``early_ahead=True`` that of issuing the next row's quarter 0 before this row's
    was read."""
    if slots not in (1, 2):
        raise ValueError(f"slots must be 1 (the bug) or 2 (the kernel), got {slots!r}")
    validate.boolean(early_load, "early_load")
    validate.boolean(early_ahead, "early_ahead")
    validate.count(rows, "rows", high=32)
    spec = ch1.softmax_halves_spec(num_ctas)
    q = spec.constexprs["BLOCK_N"] // (4 * num_ctas)
    chunks = q // spec.constexprs["CHUNK"]
    quarter = q * 4                                                           # fp32: a quarter of a CTA's slice
    p = Protocol(f"softmax in halves, {num_ctas} CTAs, {rows} row(s)" + ("" if slots == 2 else ", one slot")
                 + (", next row loaded early" if early_load else "")
                 + (", next quarter 0 loaded before the read" if early_ahead else ""), num_ctas,
                 ("softmax_halves", {"num_ctas": num_ctas}, "sm_90a"), compiler_cluster_barriers=1)
    p.runtime = {"M": rows}                                # one program: every row is its own
    every = tuple(range(chunks))

    def load_ahead(t, r, site):
        t.expect(early, quarter, r, site=f"expect {site}")
        t.tma_load(early, [("ahead", 0, r + 1, [], quarter)], r, site=f"tma_load {site}")

    def load_back(t, r, site):
        t.expect(ready, 2 * quarter, r, site=f"expect {site}")
        t.tma_load(ready, [("third", every, 2 * r + 1, [], quarter)], r, site=f"tma_load third {site}")
        t.tma_load(ready, [("fourth", every, 2 * r + 1, [], quarter)], r, site=f"tma_load fourth {site}")

    early = p.barrier("early")
    ready = p.barrier("ready")
    landed = p.barrier("landed", 2)
    for c in range(num_ctas):
        t = p.thread(c, "main")
        load_ahead(t, 0, "early, the first row")
        load_back(t, 0, "ready, the first row")
        for r in range(rows):
            slot, lap = (r % 2, r // 2) if slots == 2 else (0, r)
            t.wait(early, r, parity=r & 1, site="wait early")
            if early_ahead and r + 1 < rows:
                load_ahead(t, r + 1, "early")
            t.read("ahead", 0, r + 1, site="read ahead")
            if not early_ahead and r + 1 < rows:
                load_ahead(t, r + 1, "early")
            t.wait(ready, r, parity=r & 1, site="wait ready")
            for buf in ("third", "fourth"):
                for k in range(chunks):
                    t.read(buf, k, 2 * r + 1, site=f"read {buf}[{k}] (max)")
            for buf in ("third", "fourth"):
                for k in range(chunks):
                    t.read(buf, k, 2 * r + 1, site=f"read {buf}[{k}] (exp)")
                    t.write(buf, k, 2 * r + 2, site=f"write {buf}[{k}] (exp)")
            if early_load and r + 1 < rows:
                load_back(t, r + 1, "ready")
            _exchange_row(t, landed, slot, lap, num_ctas)
            for buf in ("third", "fourth"):
                for k in range(chunks):
                    t.read(buf, k, 2 * r + 2, site=f"read {buf}[{k}] (store)")
            if not early_load and r + 1 < rows:
                load_back(t, r + 1, "ready")
        t.invalidate(early, site="invalidate early")
        t.invalidate(ready, site="invalidate ready")
        t.invalidate(landed[0], site="invalidate landed[0]")
        t.invalidate(landed[1], site="invalidate landed[1]")
    return p


# ------------------------------------------------------------------ chapters 2 to 6

def exchange(num_ctas: int = 4) -> Protocol:
    """Chapter 2, ``exchange_kernel``: publish a row, gather on CTA 0, broadcast ``go``, read all rows."""
    p = Protocol(f"exchange, {num_ctas} CTAs", num_ctas, ("cluster_exchange", {"num_ctas": num_ctas}, "sm_90a"),
                 compiler_cluster_barriers=1)
    p.runtime = {}
    arrived = p.barrier("arrived", bases=all_ctas(num_ctas))             # one barrier, in CTA 0
    go = p.barrier("go")                                                   # one per CTA
    for c in range(num_ctas):
        t = p.thread(c, "main")
        t.write("pub", 0, 1)
        t.arrive(arrived, 0)
        t.wait(arrived, 0)
        t.arrive(go, 0, from_cta=0)
        t.wait(go, 0)
        t.read("pub", 0, 1, at=range(num_ctas))                            # peers' rows through DSMEM
        t.invalidate(arrived)                      # retired: every arrival landed before the waits returned
        t.invalidate(go)
    return p


def ping_pong(num_ctas: int = 2, rounds: int = 2, one_phase: bool = False) -> Protocol:
    """Chapter 2, ``ping_pong_kernel``: each round, write my slot, gather + release, read every slot,
    gather + release again before anyone overwrites. ``one_phase``: the kernel's ``ONE_PHASE`` bug,
    the phase never flips."""
    rounds = validate.count(rounds, "rounds", high=64)
    p = Protocol(f"ping-pong, {num_ctas} CTAs, {rounds} rounds" + (", one phase (bug)" if one_phase else ""),
                 num_ctas, None if one_phase else ("ping_pong", {"num_ctas": num_ctas}, "sm_90a"),
                 compiler_cluster_barriers=1)
    p.runtime = {"ROUNDS": rounds}
    arrived = p.barrier("arrived", bases=all_ctas(num_ctas))
    go = p.barrier("go")
    freed = p.barrier("freed", bases=all_ctas(num_ctas))
    freed_go = p.barrier("freed_go")
    for c in range(num_ctas):
        t = p.thread(c, "main")
        phase = 0
        for r in range(rounds):
            t.write("box", 0, r + 1)
            t.arrive(arrived, r)
            t.wait(arrived, r, parity=phase)
            t.arrive(go, r, from_cta=0)
            t.wait(go, r, parity=phase)
            t.read("box", 0, r + 1, at=range(num_ctas))
            t.arrive(freed, r, frees=["box"])
            t.wait(freed, r, parity=phase)
            t.arrive(freed_go, r, from_cta=0)
            t.wait(freed_go, r, parity=phase)
            if not one_phase:
                phase ^= 1
        for bar in (arrived, go, freed, freed_go):     # retired after the last round
            t.invalidate(bar)
    return p


def pair_sum() -> Protocol:
    """Chapter 2, ``pair_sum_kernel``: 8 CTAs, one barrier per pair (``PAIR_LAYOUT``); the leader
    releases its pair with a broadcast keeping the pair-number bits."""
    bases = ch2.PAIR_LAYOUT
    keep = sum(1 << i for i, b in enumerate(bases) if b[0])                 # the kernel's PAIR_MASK
    p = Protocol("pair barriers, 8 CTAs", 8, ("pair_sum", {}, "sm_90a"), compiler_cluster_barriers=1)
    p.runtime = {}
    pair_bar = p.barrier("pair_bar", bases=bases)
    go = p.barrier("go")
    for c in range(8):
        t = p.thread(c, "main")
        t.write("box", 0, 1)
        t.arrive(pair_bar, 0)
        t.wait(pair_bar, 0)
        t.arrive(go, 0, from_cta=keep)
        t.wait(go, 0)
        t.read("box", 0, 1, at=(c & ~1, c | 1))
        t.invalidate(pair_bar)
        t.invalidate(go)
    return p


def barrier_cost(num_ctas: int = 2, mode: int = 1, rounds: int = 2) -> Protocol:
    """Chapter 2, ``barrier_cost_kernel`` in ``mode`` (see ``barriers.MODES``; 3, the relaxed cluster barrier, has
    no model: it orders execution, not memory, and the census counts only ordinary cluster barriers): ``rounds``
    hand-offs of one kind. 0: an mbarrier of one's own; 1 and 5: gather on CTA 0's barrier, broadcast ``go`` (5
    adds fences the models do not see); 2: a cluster barrier; 4: mode 1 with release and acquire at cluster
    scope (chapter 2's release_arrive / acquire_wait, whose lanes the tie reads)."""
    if mode not in (0, 1, 2, 4, 5):
        raise ValueError(f"mode must be 0, 1, 2, 4 or 5 (3, the relaxed cluster barrier, has no model), got {mode!r}")
    rounds = validate.count(rounds, "rounds", high=64)
    p = Protocol(f"barrier cost, {num_ctas} CTAs, mode {mode}", num_ctas,
                 ("barrier_cost", {"num_ctas": num_ctas, "mode": mode}, "sm_90a"), compiler_cluster_barriers=1)
    p.runtime = {"ROUNDS": rounds}
    if mode == 0:
        own = p.barrier("own")
    elif mode != 2:
        arrived = p.barrier("arrived", bases=all_ctas(num_ctas))             # one barrier, in CTA 0
        go = p.barrier("go")                                                   # one per CTA
    for c in range(num_ctas):
        t = p.thread(c, "main")
        phase = 0
        for r in range(rounds):
            if mode == 0:
                t.arrive(own, r)
                t.wait(own, r, parity=phase)
            elif mode == 2:
                t.cluster_barrier()
            else:
                t.arrive(arrived, r)
                t.wait(arrived, r, parity=phase)
                t.arrive(go, r, from_cta=0)
                t.wait(go, r, parity=phase)
            phase ^= 1
        if mode not in (0, 2):
            t.invalidate(arrived)
            t.invalidate(go)
    return p


RELEASES = {**ring.RELEASES, "none": ring.RELEASE_NONE}          # chapter 3's RELEASE modes, by name


def tile_stream(num_ctas: int = 2, release="mbarrier", multicast: bool = True, stages: int = 2,
                tiles: int | None = None) -> Protocol:
    """Chapter 3, ``tile_stream_kernel``: a ring of ``stages`` buffers, each tile multicast by CTA 0
    into every CTA; before a reload, ``release``: "cluster" (0: a cluster barrier), "mbarrier" (1:
    gather on CTA 0, broadcast ``go``) or "none" (2: safe on one CTA only)."""
    if release not in RELEASES and release not in RELEASES.values():
        raise ValueError(f"release must be one of {sorted(RELEASES)} (or its mode number), got {release!r}")
    mode = RELEASES[release] if isinstance(release, str) else release
    name = {v: k for k, v in RELEASES.items()}[mode]
    tiles = stages + 2 if tiles is None else tiles
    bases = ch3.stream_bases(num_ctas)                     # every CTA holds the whole tile
    nbytes = ch3.STREAM_TILE_BYTES                         # expected by each CTA
    p = Protocol(f"tile stream, {num_ctas} CTAs, release {name}" + ("" if multicast else ", no multicast"),
                 num_ctas, ("tile_stream", {"num_ctas": num_ctas, "multicast": multicast, "release": mode,
                                            "stages": stages}, "sm_90a"), compiler_cluster_barriers=int(num_ctas > 1))
    p.runtime = {"TILES": tiles, "SRC_TILES": tiles, "CHECK": "layout", "PER_CTA": "layout"}   # the reads: CHECK
    ready = p.barrier("ready", stages)
    if mode == 1:
        empty = p.barrier("empty", stages, bases=all_ctas(num_ctas))
        go = p.barrier("go", stages)
    for c in range(num_ctas):
        t = p.thread(c, "main")
        for s in range(stages):                                            # prologue (static_range)
            t.expect(ready[s], nbytes, 0, site=f"expect ready[{s}]")
            t.tma_load(ready[s], [("bufs", s, 1, bases, nbytes)], 0, multicast, site=f"tma_load bufs[{s}]")
        for i in range(tiles):
            slot, lap = i % stages, i // stages
            t.wait(ready[slot], lap)
            t.read("bufs", slot, lap + 1)
            if i + stages < tiles:
                if mode == 0:
                    t.cluster_barrier(frees=["bufs"])
                elif mode == 1:
                    t.arrive(empty[slot], lap, frees=["bufs"])
                    t.wait(empty[slot], lap)
                    t.arrive(go[slot], lap, from_cta=0)
                    t.wait(go[slot], lap)
                t.expect(ready[slot], nbytes, lap + 1)
                t.tma_load(ready[slot], [("bufs", slot, lap + 2, bases, nbytes)], lap + 1, multicast)
    return p


def multicast_copy(num_ctas: int = 2, multicast: bool = True, M: int = 128, N: int = 64) -> Protocol:
    """Chapter 3, ``multicast_copy_kernel``: one tile that every CTA holds whole (a broadcast layout); with
    ``multicast`` CTA 0 issues one load that lands in every CTA, else each CTA loads its own copy. Each waits,
    retires its barrier, reads its copy; the store back reads it too (the PTX issues it from one CTA)."""
    bases = [list(b) for b in ch3.copy_layouts(num_ctas, M, N)["tile"].cga_layout]
    nbytes = M * N * 2                                                    # fp16, the whole tile in every CTA
    p = Protocol(f"multicast copy, {num_ctas} CTAs" + ("" if multicast else ", own copies"), num_ctas,
                 ("multicast_copy", {"num_ctas": num_ctas, "multicast": multicast}, "sm_90a"),
                 compiler_cluster_barriers=2 if multicast else 1,
                 notes="Triton adds a cluster barrier at exit and, with multicast only, one more in the "
                       "mismatch count's reduction (the PTX names standard.py's reduce).")
    p.runtime = {}
    bar = p.barrier("bar")
    for c in range(num_ctas):
        t = p.thread(c, "main")
        t.expect(bar, nbytes, 0)
        t.tma_load(bar, [("smem", 0, 1, bases, nbytes)], 0, multicast)
        t.wait(bar, 0)
        t.invalidate(bar)
        t.read("smem", 0, 1)
        t.tma_store("smem", 0, 1)
        t.store_wait(0)
    return p


def hopper_multicast_matmul(num_ctas: int = 2, release="mbarrier", stages: int = 3, k_steps: int | None = None,
                            bm: int = 64, bn: int = 128, bk: int = 64) -> Protocol:
    """Chapter 3, ``hopper_multicast_matmul_kernel``: the tile stream's ring with two loads a stage (A: my rows; B:
    issued by CTA 0, multicast into every CTA), one wgmma a step retired by ``warpgroup_mma_wait(0)`` before the
    cluster-wide ``release`` ("cluster" or "mbarrier", as in :func:`tile_stream`), then the epilogue's staging
    buffer, which Triton's allocation may lay over the ring (hence the invalidates before it)."""
    if release not in RELEASES and release not in RELEASES.values():
        raise ValueError(f"release must be one of {sorted(RELEASES)} (or its mode number), got {release!r}")
    mode = RELEASES[release] if isinstance(release, str) else release
    plan = ch3.plan_multicast_matmul(num_ctas, bm, bn, bk, stages, mode)
    lay = plan.layouts()
    a_b, b_b = [list(b) for b in lay["a"].cga_layout], [list(b) for b in lay["b"].cga_layout]
    a_bytes, b_bytes = _per_cta_bytes((bm * num_ctas, bk), a_b), _per_cta_bytes((bk, bn), b_b)
    k_steps = validate.optional_count(k_steps, "k_steps", high=64)
    steps = max(stages + 2 if k_steps is None else k_steps, stages)        # the kernel's max(k_tiles, STAGES)
    name = {v: k for k, v in RELEASES.items()}[mode]
    p = Protocol(f"Hopper multicast matmul, {num_ctas} CTAs, release {name}", num_ctas,
                 ("hopper_multicast_matmul", {"num_ctas": num_ctas, "release": mode, "stages": stages}, "sm_90a"),
                 compiler_cluster_barriers=2 * int(num_ctas > 1),
                 notes="Triton adds two cluster barriers: before c_smem.store (c_smem lies over B's ring, which "
                       "peers write by multicast) and at exit.")
    p.runtime = {"K": steps * bk}
    ready = p.barrier("ready", stages)
    if mode == 1:
        empty = p.barrier("empty", stages, bases=all_ctas(num_ctas))
        go = p.barrier("go", stages)
    for c in range(num_ctas):
        t = p.thread(c, "main")
        loads = [1] * stages
        for s in range(stages):                                            # prologue (static_range)
            t.expect(ready[s], a_bytes + b_bytes, 0, site=f"expect ready[{s}]")
            t.tma_load(ready[s], [("a", s, 1, a_b, a_bytes), ("b", s, 1, b_b, b_bytes)], 0, site=f"tma_load [s={s}]")
        for i in range(steps):
            slot, lap = i % stages, i // stages
            t.wait(ready[slot], lap)
            t.wgmma([("a", slot, lap + 1), ("b", slot, lap + 1)])
            t.wgmma_wait(0)
            if i + stages < steps:
                if mode == 0:
                    t.cluster_barrier()
                elif mode == 1:
                    t.arrive(empty[slot], lap)
                    t.wait(empty[slot], lap)
                    t.arrive(go[slot], lap, from_cta=0)
                    t.wait(go[slot], lap)
                t.expect(ready[slot], a_bytes + b_bytes, lap + 1)
                t.tma_load(ready[slot], [("a", slot, lap + 2, a_b, a_bytes), ("b", slot, lap + 2, b_b, b_bytes)],
                           lap + 1)
                loads[slot] += 1
        for s in range(stages):                                            # static_range
            t.invalidate(ready[s], site=f"invalidate ready[{s}]")
            if mode == 1:
                t.invalidate(empty[s], site=f"invalidate empty[{s}]")
                t.invalidate(go[s], site=f"invalidate go[{s}]")
        t.write("c_smem", 0, 1, over=(("b", 0, loads[0] + 1),))    # Triton's allocation: c_smem on B's slot 0
        t.tma_store("c_smem", 0, 1)
        t.store_wait(0)
    return p


def _pair(cta, two_ctas):
    leader = cta & ~1 if two_ctas else cta
    return leader, ((leader, leader + 1) if two_ctas else (leader,))


def _per_cta_bytes(block, bases, elem=2):
    """Bytes of a [rows, cols] block that each CTA holds: the block split over its distinct tiles."""
    n = 1 << len(bases)
    distinct = len({ch3.tile_of([tuple(b) for b in bases], c) for c in range(n)}) if bases else 1
    return block[0] * block[1] * elem // distinct


def mma_tile(two_ctas: bool = True, N: int = 128, K: int = 64) -> Protocol:
    """Chapter 4, ``two_cta_mma_kernel`` (or its 1-CTA twin): each CTA expects its own bytes on the
    pair's ``loaded`` barrier, the leader issues one MMA, its commit reaches both CTAs."""
    M = 256 if two_ctas else 128
    L = ch4.tile_layouts(M, N, K, two_ctas)
    C = L["num_ctas"]
    a_b, b_b = L["a"].cga_layout, L["b"].cga_layout
    a_bytes, b_bytes = _per_cta_bytes((M, K), a_b), _per_cta_bytes((K, N), b_b)
    p = Protocol(f"{'2-CTA' if two_ctas else '1-CTA'} MMA tile", C,
                 ("two_cta_mma" if two_ctas else "one_cta_mma", {}, "sm_100a"),
                 compiler_cluster_barriers=3 if two_ctas else 0)
    p.runtime = {}
    loaded = p.barrier("loaded", two_ctas=two_ctas)
    done = p.barrier("done", count=commit_count([a_b, b_b], multicast=False, two_ctas=two_ctas))
    for c in range(C):
        t = p.thread(c, "main")
        leader, pair = _pair(c, two_ctas)
        t.expect(loaded, a_bytes + b_bytes, 0)
        t.tma_load(loaded, [("a", 0, 1, a_b, a_bytes), ("b", 0, 1, b_b, b_bytes)], 0, multicast=False)
        t.wait(loaded, 0)
        acc = tuple((x, "acc", 0, 1) for x in pair)
        t.mma([(x, b, 0, 1) for x in pair for b in "ab"],
              [(done, commit_targets(leader, [a_b, b_b], C, False, two_ctas), 0)],
              writes=acc, completes=acc, issue=c == leader)
        t.wait(done, 0)
        t.invalidate(loaded)                       # the kernel's invalidates: c_smem may reuse barrier bytes
        t.invalidate(done)
        t.read("acc", 0, 1)
        t.write("c_smem", 0, 1, over=ALIASES["c_smem"])   # the allocation puts c_smem over A and B
        t.tma_store("c_smem", 0, 1)
        t.store_wait(0)
    return p


# What the compiled allocation of chapter 4's kernels places each buffer over (Triton reuses the bytes of
# buffers that are dead): c_smem starts at A's offset and spans A and B (and, in the pair kernel, the two
# barriers: hence the invalidates). tests/test_protocols_ptx.py reads it from the PTX. (Chapter 5's staging
# buffers share nothing: they lie after the ring, before the barriers; the same test checks that.)
ALIASES = {"c_smem": (("a", 0, 2), ("b", 0, 2))}


def multicast_mma(acc_bases=None, two_ctas=None, k_tiles=None) -> Protocol:
    """Chapters 3-4, ``blackwell_multicast_mma_kernel``: one stage, TMA multicast between the pairs,
    ``tcgen05_mma(multicast=True)`` telling every CTA that fed an MMA that its buffers are free."""
    upstream = ch3.UPSTREAM_BLACKWELL
    acc_bases = upstream["acc_bases"] if acc_bases is None else acc_bases
    two_ctas = upstream["two_ctas"] if two_ctas is None else two_ctas
    k_tiles = upstream["K_TILES"] if k_tiles is None else k_tiles
    a_b, b_b = operands.operand_cga_layouts(acc_bases, two_ctas)
    C = 1 << len(acc_bases)
    upstream_config = (tuple(acc_bases), two_ctas) == (tuple(upstream["acc_bases"]), upstream["two_ctas"])
    BM = upstream["BM"] if upstream_config else upstream["BM"] // (1 if two_ctas else 2)
    a_bytes = _per_cta_bytes((BM, upstream["BK"]), a_b)     # the kernel's BM, the one in params: its A box
    b_bytes = _per_cta_bytes((upstream["BK"], upstream["BN"]), b_b)
    params = {} if upstream_config else {"acc_bases": acc_bases, "two_ctas": two_ctas, "BM": BM}
    p = Protocol(f"tcgen05 multicast loop, {C} CTAs", C, ("blackwell_multicast_mma", {**params, "K_TILES": k_tiles},
                                                          "sm_100a"), compiler_cluster_barriers=3 if two_ctas else 2,
                 notes="K_TILES is a constexpr: the compiler unrolls the loop, every K step is its own code site.")
    p.runtime = {}
    loaded = p.barrier("loaded", two_ctas=two_ctas)
    consumed = p.barrier("consumed", count=commit_count([a_b, b_b], multicast=True, two_ctas=two_ctas))
    for c in range(C):
        t = p.thread(c, "main")
        leader, pair = _pair(c, two_ctas)
        targets = commit_targets(leader, [a_b, b_b], C, True, two_ctas)
        acc = tuple((x, "acc", 0, 1) for x in pair)
        for k in range(k_tiles):
            t.expect(loaded, a_bytes + b_bytes, k, site=f"expect [k={k}]")
            t.tma_load(loaded, [("a", 0, k + 1, a_b, a_bytes), ("b", 0, k + 1, b_b, b_bytes)], k,
                       site=f"tma_load [k={k}]")
            t.wait(loaded, k, site=f"wait loaded [k={k}]")
            t.mma([(x, b, 0, k + 1) for x in pair for b in "ab"], [(consumed, targets, k)],
                  writes=acc if k == 0 else (), completes=acc if k == k_tiles - 1 else (), issue=c == leader,
                  site=f"mma [k={k}]")
            t.wait(consumed, k, site=f"wait consumed [k={k}]")
        t.invalidate(loaded)                       # as in chapter 4: c_smem may reuse the barriers' bytes
        t.invalidate(consumed)
        t.read("acc", 0, 1)
        t.write("c_smem", 0, 1, over=(("a", 0, k_tiles + 1), ("b", 0, k_tiles + 1)))   # over A and B too
        t.tma_store("c_smem", 0, 1)
        t.store_wait(0)
    return p


CLC_RELEASES = ("cluster", "group", "pair")


def kernel_depths(name):
    """The pipeline depths a kernel is built with (its CONFIG): a model with these depths has the
    kernel's code sites. Checks use smaller ones (every reuse of every buffer still happens)."""
    if name == "clc_matmul":
        cfg = ch5.CONFIG
        return cfg["stages"], cfg["acc_stages"], cfg["block_n"] // cfg["epilogue_n"]
    raise ValueError(f"kernel_depths knows the pipelined kernel 'clc_matmul' only, got {name!r}")


def clc_matmul(cga_layout=None, release: str = "cluster", staging: str = "across", tiles: int = 3,
               k_steps: int = 1, stages: int = 2, acc_stages: int = 2, subtiles: int = 2,
               slots_only: bool = False, tails: bool = True, slots: int | None = None) -> Protocol:
    """Chapter 5, ``clc_matmul_kernel``: scheduler, loader, MMA and epilogue partitions in every CTA;
    the load ring, the double-buffered accumulator, the CLC answer slots, the epilogue's staging
    buffers. Every partition runs ``tiles`` tiles, so it reads ``tiles`` answers (the last fails).

    ``release`` of an answer slot before the next ``try_cancel``: "cluster" (the kernel: each CTA's
    ``clc_empty`` counts its own four readers, every scheduler waits on it, then the schedulers meet
    at a cluster barrier before CTA 0 asks again), "group" (the kernel before: one ``clc_empty`` in
    CTA 0 counting every reader of the cluster, only CTA 0 waits) or "pair" (upstream's tutorial: a
    two_ctas barrier per pair, so CTA 0 hears only from its own pair). ``staging``: the epilogue's
    buffer index runs "across" tiles (the kernel's ``stores % 2``) or restarts "per_tile" (``j % 2``,
    the kernel before). ``slots_only``: only the answer slots (every partition still reads every
    answer, but does nothing else: any timing of the readers). ``tails``: the loader and the MMA
    partition wait out the phases owed to them before they return (the kernel; ``False``: the kernel
    before, whose last commits on ``load_empty`` may land after the cluster has exited). ``slots``:
    answer slots (default the kernel's ``CLC_SLOTS``; 1 makes every answer reuse the slot, as a
    depth-1 ring does with stages and accumulators)."""
    if release not in CLC_RELEASES or staging not in ("across", "per_tile"):
        raise ValueError(f"release must be one of {CLC_RELEASES} and staging 'across' or 'per_tile', got "
                         f"{release!r} and {staging!r}")
    for v, name in ((tiles, "tiles"), (k_steps, "k_steps"), (stages, "stages"), (acc_stages, "acc_stages"),
                    (subtiles, "subtiles")):            # before the runtime sizes are built from them
        validate.count(v, name, high=MAX_OPS)
    acc = tuple(tuple(b) for b in (ch5.CONFIG["cga_layout"] if cga_layout is None else cga_layout))
    C = 1 << len(acc)
    a_b, b_b = operands.operand_cga_layouts(acc, two_ctas=True)
    slots, readers = ch5.CLC_SLOTS.value if slots is None else slots, ch5.CLC_READERS.value
    commits = commit_count([a_b, b_b], multicast=True, two_ctas=True)
    cfg = ch5.CONFIG
    a_bytes = _per_cta_bytes((cfg["block_m"] * (1 << sum(1 for m, _ in acc if m)), cfg["block_k"]), a_b)
    b_bytes = _per_cta_bytes((cfg["block_k"], cfg["block_n"]), b_b)
    params = {} if acc == tuple(cfg["cga_layout"]) else {"cga_layout": acc}
    what = "answer slots only" if slots_only else f"staging {staging}, {subtiles} sub-tile(s)" + \
        ("" if tails else ", no producer tails")
    as_built = (release, staging, stages, acc_stages, subtiles, tails, slots) == (
        "cluster", "across", *kernel_depths("clc_matmul"), True, ch5.CLC_SLOTS.value)
    p = Protocol(f"CLC matmul, {C} CTAs, {tiles} tiles, {release} release, {what}", C,
                 ("clc_matmul", params, "sm_100a") if as_built and not slots_only else None, warp_specialized=True,
                 compiler_cluster_barriers=3)
    p.runtime = {"M": cfg["block_m"] * 2 * tiles, "N": cfg["block_n"], "K": cfg["block_k"] * k_steps,
                 "_clc_tiles": tuple(range(1, tiles))}         # every answer but the last cancels a cluster
    load_ready = p.barrier("load_ready", stages, two_ctas=True)
    load_empty = p.barrier("load_empty", stages, count=commits)
    acc_ready = p.barrier("acc_ready", acc_stages, count=commits)
    acc_empty = p.barrier("acc_empty", acc_stages, two_ctas=True)
    clc_ready = p.barrier("clc_ready", slots)
    clc_empty = p.barrier("clc_empty", slots, count=readers,
                          **{"cluster": {}, "group": {"bases": all_ctas(C)}, "pair": {"two_ctas": True}}[release])

    def next_tile(t, i):                                    # Shared.next_tile, in every partition
        slot, lap = i % slots, i // slots
        t.wait(clc_ready[slot], lap)
        t.read("clc_result", slot, lap + 1)
        t.arrive(clc_empty[slot], lap, frees=["clc_result"])

    for c in range(C):
        leader, pair = _pair(c, True)
        targets = commit_targets(leader, [a_b, b_b], C, True, True)
        t = p.thread(c, "scheduler")
        for i in range(tiles):
            slot, lap = i % slots, i // slots
            t.wait(clc_empty[slot], lap - 1, parity=(lap & 1) ^ 1)
            if release == "cluster":
                t.cluster_barrier("schedulers")
            t.expect(clc_ready[slot], 16, lap)
            t.try_cancel("clc_result", slot, lap + 1, clc_ready[slot], lap, issue=c == 0)
            next_tile(t, i)
        t = p.thread(c, "loader")
        it = 0
        for i in range(tiles):
            for k in range(0 if slots_only else k_steps):
                s, lap = it % stages, it // stages
                t.wait(load_empty[s], lap - 1, parity=(lap & 1) ^ 1)
                t.expect(load_ready[s], a_bytes + b_bytes, lap)
                t.tma_load(load_ready[s], [("a", s, lap + 1, a_b, a_bytes), ("b", s, lap + 1, b_b, b_bytes)], lap)
                it += 1
            next_tile(t, i)
        for j in range(stages if tails and not slots_only else 0):        # the producer tail (static_range)
            s, lap = (it + j) % stages, (it + j) // stages
            t.wait(load_empty[s], lap - 1, parity=(lap & 1) ^ 1, site=f"wait load_empty (tail) [j={j}]")
        t = p.thread(c, "mma")
        it = 0
        for i in range(tiles):
            a, alap = i % acc_stages, i // acc_stages
            if not slots_only:
                t.wait(acc_empty[a], alap - 1, parity=(alap & 1) ^ 1)
            written = tuple((x, "acc", a, alap + 1) for x in pair)
            for k in range(0 if slots_only else k_steps):
                s, lap = it % stages, it // stages
                t.wait(load_ready[s], lap)
                last = k == k_steps - 1
                t.mma([(x, b, s, lap + 1) for x in pair for b in "ab"],
                      [(load_empty[s], targets, lap)] + ([(acc_ready[a], targets, alap)] if last else []),
                      writes=written if k == 0 else (), completes=written if last else (), issue=c == leader)
                it += 1
            next_tile(t, i)
        for j in range(acc_stages if tails and not slots_only else 0):    # the accumulators' tail
            a, alap = (tiles + j) % acc_stages, (tiles + j) // acc_stages
            t.wait(acc_empty[a], alap - 1, parity=(alap & 1) ^ 1, site=f"wait acc_empty (tail) [j={j}]")
        t = p.thread(c, "epilogue")
        stores, used = 0, [0, 0]
        for i in range(tiles):
            a, alap = i % acc_stages, i // acc_stages
            if not slots_only:
                t.wait(acc_ready[a], alap)
                for j in range(subtiles):                                  # static_range: a site each
                    buf = stores % 2 if staging == "across" else j % 2
                    used[buf] += 1
                    t.read("acc", a, alap + 1, site=f"read acc [j={j}]")    # this sub-tile's columns
                    t.store_wait(1, site=f"store_wait(1) [j={j}]")
                    t.write("c_smem", buf, used[buf], site=f"write c_smem [j={j}]")
                    t.tma_store("c_smem", buf, used[buf], site=f"tma_store [j={j}]")
                    stores += 1
                t.arrive(acc_empty[a], alap, frees=["acc"])
            next_tile(t, i)
        if not slots_only:
            t.store_wait(0, site="store_wait(0) at exit")
    return p


def _ring_producer(t, ready, empty, go, stages, steps, boxes):
    """Chapter 6's producer partition (``producer_partition``; ``wide_producer`` with ``go=None``): ``steps`` ring
    steps, each waiting until its stage is free (after its first lap), then one expect of every box's bytes and
    their TMA loads on ``ready``. ``boxes``: [(buffer, cga bases, bytes per CTA)]. With ``go`` and several CTAs,
    CTA 0's release is broadcast on ``go`` before the reload."""
    num_ctas = t.p.num_ctas
    for it in range(steps):
        s, lap = it % stages, it // stages
        if it >= stages:
            t.wait(empty[s], lap - 1, parity=(lap & 1) ^ 1)
            if go is not None and num_ctas > 1:     # a lone CTA's producer skips the broadcast
                t.arrive(go[s], lap - 1, from_cta=0)
                t.wait(go[s], lap - 1, parity=(lap & 1) ^ 1)
        t.expect(ready[s], sum(b for _, _, b in boxes), lap)
        t.tma_load(ready[s], [(buf, s, lap + 1, bases, b) for buf, bases, b in boxes], lap)


def _consumer_step(t, ready, empty, stages, it, k, reads, release_early):
    """Ring step ``it`` (K step ``k`` of its tile) of a chapter 6 consumer: wait until the stage has landed, one wgmma
    reading ``reads`` of it, wait until the previous step's wgmma is done (``warpgroup_mma_wait(1)``), then give that
    step's stage back; with ``release_early`` (a bug) the stage is given back right after its wgmma is issued."""
    s, lap = it % stages, it // stages
    t.wait(ready[s], lap)
    t.wgmma([(b, s, lap + 1) for b in reads])
    if release_early:
        t.arrive(empty[s], lap, site="arrive empty (early)")
    t.wgmma_wait(1)
    if k > 0 and not release_early:
        t.arrive(empty[(it - 1) % stages], (it - 1) // stages, site="arrive empty (in loop)")


def hopper_matmul(num_ctas: int = 2, consumers: int = 2, turns: bool = True, release_early: bool = False,
                  tiles: int = 3, k_steps: int = 2, stages: int = 2, split: int = 1) -> Protocol:
    """Chapter 6, ``hopper_matmul_kernel``: a producer partition (the TMA, B multicast by CTA 0, and
    the cluster-wide release of a stage: gather on CTA 0's ``empty``, broadcast ``go``) and one or
    two consumers (wgmma; two take alternate tiles, ping-pong, in ``turn``). Bugs: ``turns=False``
    (ping-pong without turns) and ``release_early`` (a consumer frees a stage right after issuing
    its wgmma, one stage early: that wgmma may still be reading it)."""
    if num_ctas not in (1, 2, 4) or consumers not in (1, 2):
        raise ValueError(f"the Hopper matmul runs 1, 2 or 4 CTAs and 1 or 2 consumers, got {num_ctas!r} and {consumers!r}")
    cfg = ch6.CONFIG
    n = log2(num_ctas)
    a_b, b_b = [[1 << i, 0] for i in range(n)], [[0, 0]] * n     # A: my rows; B: shared, multicast
    block_m = 64 if consumers == 2 else cfg["block_m"]
    a_bytes = _per_cta_bytes((block_m * num_ctas, cfg["block_k"]), a_b)
    b_bytes = _per_cta_bytes((cfg["block_k"], cfg["block_n"]), b_b)
    bugs = [x for x, on in (("no turns", not turns and consumers == 2), ("released early", release_early)) if on]
    p = Protocol(f"Hopper matmul, {num_ctas} CTAs, {consumers} consumer(s)" + "".join(f", {b} (bug)" for b in bugs),
                 num_ctas, None if bugs else ("hopper_matmul", {"num_ctas": num_ctas, "consumers": consumers,
                                                                "block_m": block_m, "stages": stages,
                                                                "epilogue_n": cfg["block_n"] // split}, "sm_90a"),
                 warp_specialized=True, compiler_cluster_barriers=2 if num_ctas > 1 else 0)
    p.runtime = {"M": block_m * num_ctas * tiles, "N": cfg["block_n"], "K": cfg["block_k"] * k_steps}
    if consumers == 2:
        p.ptx_merges = {"store_wait": 1}
        p.notes = "LLVM merges the two consumers' identical exit store_wait(0) into one block of PTX."
    ready = p.barrier("ready", stages)
    empty = p.barrier("empty", stages, bases=all_ctas(num_ctas))          # one per stage, in CTA 0
    go = p.barrier("go", stages)
    turn = p.barrier("turn", 2) if consumers == 2 else None
    for c in range(num_ctas):
        _ring_producer(p.thread(c, "producer"), ready, empty, go, stages, tiles * k_steps,
                       [("a", a_b, a_bytes), ("b", b_b, b_bytes)])
        for w in range(consumers):
            t = p.thread(c, f"consumer {w}")
            first, used = w * (2 if split > 1 else 1), {}
            for j, tile in enumerate(range(w, tiles, consumers)):
                if consumers == 2 and turns:
                    if w == 1:
                        t.wait(turn[1], j)
                    elif j > 0:
                        t.wait(turn[0], j - 1)
                it = tile * k_steps
                for k in range(k_steps):
                    _consumer_step(t, ready, empty, stages, it, k, ("a", "b"), release_early)
                    it += 1
                if consumers == 2 and turns:
                    t.arrive(turn[1 - w], j)
                t.wgmma_wait(0, site="wgmma_wait(0)")
                if not release_early:
                    t.arrive(empty[(it - 1) % stages], (it - 1) // stages, site="arrive empty (last step)")
                for i in range(split):                                     # store_tile (static_range)
                    buf = first + i % 2
                    used[buf] = used.get(buf, 0) + 1
                    t.store_wait(0 if split == 1 else 1, site=f"store_wait [i={i}]")
                    t.write("c_smem", buf, used[buf], site=f"write c_smem [i={i}]")
                    t.tma_store("c_smem", buf, used[buf], site=f"tma_store [i={i}]")
            t.store_wait(0, site="store_wait(0) at exit")
    return p


def wide_matmul(extra: int = 64, stages: int = 4, tiles: int = 3, k_steps: int = 2, dtype: str = "float16",
                release_early: bool = False, a_regs: bool = False, one_set: bool = False) -> Protocol:
    """Chapter 6's wide tiles, ``wide_matmul_kernel``: the default Hopper matmul (one CTA, a producer partition and
    one consumer of two warpgroups, persistent) with B split in two boxes, 64 x N0 and 64 x ``extra``. A stage holds
    A's box and both B boxes: three TMA loads on one ``ready`` barrier, which expects their sum. A K step issues two
    wgmmas (one per accumulator), waits until the previous step's two are done (``warpgroup_mma_wait(2)``) and
    gives that step's stage back on ``empty``; the epilogue waits for both, gives the last stage back, waits for the
    previous tile's stores, writes both staging buffers and stores them. Bug: ``release_early`` (a stage freed right
    after its two wgmmas are issued: they may still be reading it). ``a_regs``: A's operand in registers, loaded from
    the stage once a step (a read of shared memory) into one of two register sets, the even steps' and the odd
    steps' of a tile, which both wgmmas read until a wait retires them; bug: ``one_set`` (every step loads into the
    same registers: the previous step's wgmmas may still be reading them, PTX ISA 9.7.15.7.3)."""
    validate.one_of(extra, "extra", ch6w.EXTRAS, " (the second accumulator's width)")
    validate.boolean(a_regs, "a_regs")
    validate.boolean(one_set, "one_set")
    if one_set and not a_regs:
        raise ValueError("one_set=True is a bug of A in registers: it needs a_regs=True")
    elem = DTYPES[validate.dtype(dtype)].bytes
    boxes = [("a", [], ch6w.BLOCK_M * ch6w.BLOCK_K * elem), ("b0", [], ch6w.BLOCK_K * ch6w.BLOCK_N0 * elem),
             ("b1", [], ch6w.BLOCK_K * extra * elem)]
    params = {k: v for k, v, default in (("extra", extra, 64), ("stages", stages, 4), ("dtype", dtype, "float16"),
                                         ("a_regs", a_regs, False)) if v != default}   # the catalog's own sets
    bug = release_early or one_set
    p = Protocol(f"wide matmul, 128 x {ch6w.BLOCK_N0 + extra}, {stages} stages"
                 + (f", {dtype}" if dtype != "float16" else "") + (", A in registers" if a_regs else "")
                 + (", released early (bug)" if release_early else "") + (", one set of A registers (bug)" if one_set
                                                                          else ""),
                 1, None if bug else ("wide_matmul", params, "sm_90a"), warp_specialized=True)
    p.runtime = {"M": ch6w.BLOCK_M * tiles, "N": ch6w.BLOCK_N0 + extra, "K": ch6w.BLOCK_K * k_steps}
    ready = p.barrier("ready", stages)
    empty = p.barrier("empty", stages)
    _ring_producer(p.thread(0, "producer"), ready, empty, None, stages, tiles * k_steps, boxes)
    t = p.thread(0, "consumer")
    it, loaded = 0, [0, 0]                        # a_regs: the versions of the even and odd register sets
    for tile in range(tiles):
        for k in range(k_steps):
            s, lap = it % stages, it // stages
            odd = " (odd step)" if a_regs and k % 2 else ""   # a_regs: the kernel's second call site of a turn
            t.wait(ready[s], lap, site=f"wait ready{odd}")
            a = ("a", s, lap + 1)
            if a_regs:
                r = 0 if one_set else k % 2
                t.read(*a, site="load A")
                loaded[r] += 1
                t.write("a_regs", r, loaded[r], site="A registers", registers=True)
                a = ("a_regs", r, loaded[r])
            t.wgmma([a, ("b0", s, lap + 1)], site="wgmma acc0")
            t.wgmma([a, ("b1", s, lap + 1)], site="wgmma acc1")
            if release_early:
                t.arrive(empty[s], lap, site="arrive empty (early)")
            t.wgmma_wait(2, site="wgmma_wait(2)")
            if k > 0 and not release_early:
                t.arrive(empty[(it - 1) % stages], (it - 1) // stages, site=f"arrive empty (in loop){odd}")
            it += 1
        t.wgmma_wait(0, site="wgmma_wait(0)")
        if not release_early:
            t.arrive(empty[(it - 1) % stages], (it - 1) // stages, site="arrive empty (last step)")
        t.store_wait(0, site="store_wait(0)")
        t.write("c0_smem", 0, tile + 1)
        t.write("c1_smem", 0, tile + 1)
        t.tma_store("c0_smem", 0, tile + 1)
        t.tma_store("c1_smem", 0, tile + 1)
    t.store_wait(0, site="store_wait(0) at exit")
    return p


def tall_matmul(stages: int = 4, tiles: int = 3, k_steps: int = 2, dtype: str = "float16", empty_count: int | None = None,
                release_early: bool = False) -> Protocol:
    """Chapter 6's tall tiles, ``tall_matmul_kernel``: one CTA, persistent, a producer warp and three consumer
    warpgroups, each multiplying its own 64 rows of a 192 x 128 tile. A stage holds A's three 64 x 64 boxes and B's
    64 x 128 box: four TMA loads on one ``ready`` barrier, which expects their sum, and every warpgroup waits on it.
    A K step issues one wgmma, waits until the previous step's is done (``warpgroup_mma_wait(1)``) and gives that
    step's stage back on ``empty``, initialised with GROUPS = 3 arrivals: the stage is refilled only after all three
    warpgroups have given it back. The epilogue waits for the last wgmma, gives its stage back, waits for the
    previous tile's store and writes the warpgroup's own staging buffer. Bugs: ``empty_count=1`` (the first
    warpgroup's release frees the stage, which the other two may still be reading) and ``release_early`` (a stage
    freed right after its wgmma is issued)."""
    groups = ch6w.TALL_GROUPS
    count = groups if empty_count is None else validate.count(empty_count, "empty_count", high=groups)
    elem = DTYPES[validate.dtype(dtype)].bytes
    boxes = [(f"a{g}", [], ch6w.TALL_GROUP_M * ch6w.BLOCK_K * elem) for g in range(groups)]
    boxes.append(("b", [], ch6w.BLOCK_K * ch6w.TALL_N * elem))
    params = {k: v for k, v, default in (("stages", stages, 4), ("dtype", dtype, "float16")) if v != default}
    bugs = [x for x, on in ((f"empty of {count} arrival(s)", count != groups), ("released early", release_early)) if on]
    p = Protocol(f"tall matmul, 192 x 128, {stages} stages" + (f", {dtype}" if dtype != "float16" else "")
                 + "".join(f", {b} (bug)" for b in bugs), 1, None if bugs else ("tall_matmul", params, "sm_90a"),
                 warp_specialized=True)
    p.runtime = {"M": ch6w.TALL_GROUP_M * groups * tiles, "N": ch6w.TALL_N, "K": ch6w.BLOCK_K * k_steps}
    p.ptx_merges = {"store_wait": 1}
    p.notes = "LLVM merges the two worker warpgroups' identical exit store_wait(0) into one block of PTX."
    ready = p.barrier("ready", stages)
    empty = p.barrier("empty", stages, count=count)
    _ring_producer(p.thread(0, "producer"), ready, empty, None, stages, tiles * k_steps, boxes)
    for g in range(groups):
        t = p.thread(0, f"consumer {g}")
        it = 0
        for tile in range(tiles):
            for k in range(k_steps):
                _consumer_step(t, ready, empty, stages, it, k, (f"a{g}", "b"), release_early)
                it += 1
            t.wgmma_wait(0, site="wgmma_wait(0)")
            if not release_early:
                t.arrive(empty[(it - 1) % stages], (it - 1) // stages, site="arrive empty (last step)")
            t.store_wait(0, site="store_wait(0)")
            t.write(f"c_smem{g}", 0, tile + 1)
            t.tma_store(f"c_smem{g}", 0, tile + 1)
        t.store_wait(0, site="store_wait(0) at exit")
    return p
