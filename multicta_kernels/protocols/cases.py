"""The book's registry of protocol checks: every kernel as it is, and every seeded bug with the failure it must show."""
from __future__ import annotations

from dataclasses import dataclass

from ..core import validate
from .explorer import Result, check, simulate
from .models import (barrier_cost, clc_matmul, exchange, hopper_matmul, hopper_multicast_matmul, kernel_depths, mma_tile,
                     multicast_copy, multicast_mma, pair_sum, ping_pong, softmax_one_round, softmax_pipelined,
                     softmax_halves, softmax_staged, tall_matmul, tile_stream, wide_matmul)


@dataclass(frozen=True)
class Case:
    """One check of the book: a protocol, what it must show (``None``: nothing wrong; or the kind of
    failure a seeded bug must show) and how it is explored (every interleaving, or random schedules
    where that is too big for CI; :func:`check` on those may not finish: the 4-CTA answer-slot model had
    not after 300,000 states)."""
    build: object
    expect: str | None = None
    exhaustive: bool = True

    def run(self, runs: int = 300, seed: int = 0) -> Result:
        p = self.build()
        return check(p) if self.exhaustive else simulate(p, runs=runs, seed=seed)


_C4 = ((1, 0), (2, 0))         # the 4-CTA cluster of chapter 5: two pairs stacked along M

CASES = {
    # the book's kernels, as they are
    "ch1 one-round exchange, 4 CTAs": Case(lambda: softmax_one_round(4)),
    "ch1 pipelined exchange, 2 CTAs, 2 turns": Case(lambda: softmax_pipelined(2, 2)),
    "ch1 pipelined exchange, 4 CTAs, 2 turns": Case(lambda: softmax_pipelined(4, 2), exhaustive=False),
    "ch1 staged softmax, 2 CTAs, 3 rows": Case(lambda: softmax_staged(2, 3)),
    "ch1 staged softmax, 4 CTAs, 3 rows": Case(lambda: softmax_staged(4, 3), exhaustive=False),
    "ch1 softmax in halves, 2 CTAs, 3 rows": Case(lambda: softmax_halves(2, 3)),
    "ch1 softmax in halves, 4 CTAs, 3 rows": Case(lambda: softmax_halves(4, 3), exhaustive=False),
    "ch2 exchange, 4 CTAs": Case(lambda: exchange(4)),
    "ch2 ping-pong, 2 CTAs, 3 rounds": Case(lambda: ping_pong(2, rounds=3)),
    "ch2 ping-pong, 4 CTAs, 2 rounds": Case(lambda: ping_pong(4)),
    "ch2 pair barriers, 8 CTAs": Case(pair_sum),
    "ch2 barrier cost, 4 CTAs, data hand-off (mode 4)": Case(lambda: barrier_cost(4, 4, rounds=3)),
    "ch3 multicast copy, 4 CTAs": Case(lambda: multicast_copy(4)),
    "ch3 tile stream, 4 CTAs, cluster barrier": Case(lambda: tile_stream(4, "cluster")),
    "ch3 tile stream, 4 CTAs, gather + broadcast": Case(lambda: tile_stream(4, "mbarrier")),
    "ch3 tile stream, 1 CTA, no release": Case(lambda: tile_stream(1, "none", multicast=False)),
    "ch3 tile stream, 2 CTAs, no release, no multicast": Case(lambda: tile_stream(2, "none", multicast=False)),
    "ch3 Hopper multicast matmul, 2 CTAs, gather + broadcast": Case(lambda: hopper_multicast_matmul(2, "mbarrier")),
    "ch3 Hopper multicast matmul, 4 CTAs, cluster barrier": Case(lambda: hopper_multicast_matmul(4, "cluster")),
    "ch3 tcgen05 multicast loop, 4 CTAs": Case(multicast_mma),
    "ch4 1-CTA tile": Case(lambda: mma_tile(False)),
    "ch4 2-CTA tile": Case(mma_tile),
    "ch5 CLC answer slots, 2 CTAs": Case(lambda: clc_matmul(slots_only=True)),
    "ch5 CLC matmul, 2 CTAs, 2 tiles": Case(lambda: clc_matmul(tiles=2)),
    "ch5 CLC matmul, 2 CTAs, 2 tiles, depth-1 rings": Case(lambda: clc_matmul(tiles=2, stages=1, acc_stages=1)),
    "ch5 CLC answer slots, 4 CTAs": Case(lambda: clc_matmul(_C4, slots_only=True), exhaustive=False),
    "ch5 CLC matmul, 2 CTAs, 3 tiles": Case(lambda: clc_matmul(tiles=3), exhaustive=False),
    "ch5 CLC matmul, 4 CTAs, 3 tiles": Case(lambda: clc_matmul(_C4, tiles=3), exhaustive=False),
    "ch5 CLC matmul, 4 CTAs, group release (before)": Case(lambda: clc_matmul(_C4, "group"), exhaustive=False),
    "ch6 Hopper matmul, 2 CTAs, 1 consumer": Case(lambda: hopper_matmul(2, consumers=1)),
    "ch6 Hopper matmul, 2 CTAs, ping-pong": Case(lambda: hopper_matmul(2, consumers=2)),
    "ch6 wide tiles, 128 x 192, 2 stages": Case(lambda: wide_matmul(stages=2)),
    "ch6 wide tiles, 128 x 144, 3 stages, 2 tiles of 3 steps": Case(lambda: wide_matmul(16, stages=3, tiles=2, k_steps=3)),
    "ch6 wide tiles, A in registers, 2 stages, 2 tiles of 3 steps": Case(
        lambda: wide_matmul(stages=2, tiles=2, k_steps=3, a_regs=True)),
    "ch6 tall tiles, 192 x 128, 2 stages, 3 warpgroups": Case(lambda: tall_matmul(stages=2)),
    "ch6 tall tiles, 3 stages, 2 tiles of 3 steps": Case(lambda: tall_matmul(stages=3, tiles=2, k_steps=3)),
    # what must be found
    "bug: one-round exchange reads a peer's pair before its wait (ch1)": Case(
        lambda: softmax_one_round(2).move("main.read m_all[1]", before="main.wait landed"), "read before write"),
    "bug: pipelined exchange through one slot (ch1)": Case(lambda: softmax_pipelined(2, 1, slots=1),
                                                          "overwrite before release"),
    "bug: staged softmax through one exchange slot (ch1)": Case(lambda: softmax_staged(2, 2, slots=1),
                                                               "overwrite before release"),
    "bug: softmax in halves loading the next row before the stores read (ch1)": Case(
        lambda: softmax_halves(2, 2, early_load=True), "overwrite before release"),
    "bug: softmax in halves loading the next row's quarter 0 before its read (ch1)": Case(
        lambda: softmax_halves(2, 2, early_ahead=True), "overwrite before release"),
    "ch3 no release with multicast, 2 CTAs": Case(lambda: tile_stream(2, "none"), "overwrite before release"),
    "ch3 Hopper multicast matmul without a release, 2 CTAs": Case(lambda: hopper_multicast_matmul(2, "none"),
                                                                   "overwrite before release"),
    "bug: one-phase barrier (ch2 ONE_PHASE)": Case(lambda: ping_pong(2, one_phase=True), "phase overrun"),
    "bug: per-pair CLC slot release, 4 CTAs (upstream tutorial)": Case(
        lambda: clc_matmul(_C4, "pair", slots_only=True), "overwrite before release", exhaustive=False),
    "bug: ping-pong without turns (ch6)": Case(lambda: hopper_matmul(2, consumers=2, turns=False), "phase overrun"),
    "bug: ring released one stage early (ch6)": Case(lambda: hopper_matmul(2, consumers=1, release_early=True),
                                                     "overwrite before release"),
    "bug: wide tiles' stage released before its two wgmmas are done (ch6)": Case(
        lambda: wide_matmul(stages=2, release_early=True), "overwrite before release"),
    "bug: wide tiles' A loaded into the registers the last step's wgmmas read (ch6)": Case(
        lambda: wide_matmul(stages=2, a_regs=True, one_set=True), "overwrite before release"),
    "bug: tall tiles' stage freed by the first of its three warpgroups (ch6, empty count 1)": Case(
        lambda: tall_matmul(stages=2, empty_count=1), "overwrite before release"),
    "bug: tall tiles' stage released before its wgmma is done (ch6)": Case(
        lambda: tall_matmul(stages=2, release_early=True), "overwrite before release"),
    "bug: epilogue staging restarting per tile, one sub-tile (ch5 before)": Case(
        lambda: clc_matmul(staging="per_tile", subtiles=1, tiles=2), "overwrite before release"),
    "bug: no producer tails, the last commits land after exit (ch5 before)": Case(
        lambda: clc_matmul(tiles=1, tails=False), "arrival after exit"),
    "bug: c_smem written before the MMA is done (ch4, moved up)": Case(
        lambda: mma_tile().move("main.write c_smem", before="main.wait done"), "overwrite before release"),
    "bug: barrier invalidated before its commit lands (ch4, moved up)": Case(
        lambda: mma_tile().move("main.invalidate done", before="main.wait done"), "arrival after invalidate"),
}


def kernel_models() -> list:
    """Protocols at the exact configuration of registered kernels, for :func:`compare`."""
    d = kernel_depths("clc_matmul")
    return ([softmax_one_round(c) for c in (2, 4, 16)] + [softmax_pipelined(c) for c in (2, 4, 16)] +
            [softmax_staged(c) for c in (2, 4, 16)] + [softmax_halves(c) for c in (2, 4, 16)] +
            [exchange(4), ping_pong(2), ping_pong(16), pair_sum()] +
            [barrier_cost(c, m) for c in (2, 16) for m in (0, 1, 2, 4, 5)] +
            [tile_stream(4, r, m, stages=4) for r in ("cluster", "mbarrier") for m in (True, False)] +
            [tile_stream(1, "none", multicast=False), tile_stream(2, "none")] +
            [hopper_multicast_matmul(c, r) for c in (2, 4) for r in ("cluster", "mbarrier")] +
            [multicast_copy(c, m) for c in (2, 16) for m in (True, False)] +
            [multicast_mma(), multicast_mma(((1, 0),), False), mma_tile(False), mma_tile(True)] +
            [clc_matmul(acc, stages=d[0], acc_stages=d[1], subtiles=d[2], tiles=2) for acc in (None, _C4)] +
            [hopper_matmul(c, w, stages=s) for c, w, s in ((1, 1, 3), (2, 1, 3), (4, 1, 3), (2, 2, 4), (1, 2, 4))] +
            [wide_matmul(extra) for extra in (64, 16, 32)] + [wide_matmul(dtype="bfloat16")] +
            [wide_matmul(a_regs=True, k_steps=3)] +
            [tall_matmul(), tall_matmul(dtype="bfloat16"), tall_matmul(stages=3)])


def check_book(runs: int = 300, names=None) -> list:
    """Every case (or those ``names``): rows [case, expected, found, steps, states or runs, seconds],
    for ``notebook.table(rows, ["case", "expected", "found", "steps", "states", "s"])``."""
    runs = validate.count(runs, "runs", high=1_000_000)
    if names is not None:
        names = validate.names(names, "names", CASES)
    rows = []
    for name, case in CASES.items():
        if names is not None and name not in names:
            continue
        r = case.run(runs)
        rows.append([name, case.expect or "nothing wrong", r.kind or "nothing wrong", r.steps or "",
                     r.states or f"{r.runs} runs", round(r.seconds, 2)])
    return rows
