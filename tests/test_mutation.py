"""The mutation harness (python -m multicta_kernels.cli.mutate) in CI, bounded: the recorded full run
(results/mutation_cpu.json) is complete and honest, and a sample of its killed mutants, one per mutated function, is
built again and killed again by the same in-process killer (a killer that went blind turns this red)."""
import json
from pathlib import Path

import pytest

from multicta_kernels import catalog
from multicta_kernels.cli import mutate

RECORD = Path(__file__).resolve().parent.parent / "results" / "mutation_cpu.json"
IN_PROCESS = ("compile", "expect", "census", "order", "program", "init fence")


def _record():
    return json.loads(RECORD.read_text())


def test_the_record_has_its_provenance_and_every_kernel():
    r = _record()
    assert r["benchmark"] == "mutation_cpu" and r["date"] and r["columns"] == mutate.COLUMNS
    assert r["method"]["operators"] == list(mutate.OPERATORS)
    units = {row[0] for row in r["rows"]}
    not_run = {key.split(" | ")[0] for key in r["method"].get("not_run", [])}     # said so in the record
    missing = {m.unit for _, m in mutate.mutants()} - units - not_run   # every function the operators can mutate
    assert not missing, f"not in the record: {sorted(missing)}; rerun python -m multicta_kernels.cli.mutate"
    t = r["totals"]
    assert t["compiled"] == sum(1 for row in r["rows"] if row[4] != "not compiled")
    assert t["killed_cpu"] + t["killed_gpu"] + t["survived"] + t["equivalent"] == t["compiled"]
    assert t["equivalent"] == sum(1 for row in r["rows"] if row[4] == "equivalent")
    assert all(row[5] in mutate.EQUIVALENT for row in r["rows"] if row[4] == "equivalent")
    assert all(row[7] for row in r["rows"] if row[4] == "survived")          # every survivor with its diff


def _sample():
    r = _record()
    seen, out = set(), []
    for row in r["rows"]:
        if row[4] == "killed" and row[5] in IN_PROCESS and row[0] not in seen:
            seen.add(row[0])
            out.append(row)
    return out


@pytest.mark.parametrize("row", _sample() if RECORD.exists() else [], ids=lambda row: f"{row[0]}|{row[2]}")
def test_a_recorded_kill_is_still_a_kill(row):
    unit, kernels, operator, site = row[:4]
    found = [(names, m) for names, m in mutate.mutants(kernels.split(",")) if m.key == f"{unit} | {operator} | {site}"]
    assert found, f"the harness no longer makes {unit} | {operator} | {site}: rerun python -m multicta_kernels.cli.mutate"
    names, m = found[0]
    killer, detail = mutate.cpu_killers(names, m, mutate.build(m.unit, m.source, names), configs=1)
    assert killer == row[5], f"recorded killed by {row[5]}, now {killer}: {detail}"


def test_the_tile_stream_race_is_killed_on_the_cpu():
    """Issue 25's race: tile_stream_kernel's release moved after the reload; the tie by order kills it."""
    found = [(n, m) for n, m in mutate.mutants(["tile_stream"])
             if m.unit.endswith("tile_stream_kernel") and m.operator == "move release" and "after the reload" in m.site]
    assert len(found) == 1
    names, m = found[0]
    assert mutate.cpu_killers(names, m, mutate.build(m.unit, m.source, names), configs=1)[0] == "order"


@pytest.mark.parametrize("kernel, unit, operator, site, killer", [
    ("ping_pong", "ping_pong_kernel", "skip invalidate", "drop `mbarrier.invalidate(freed)`", "census"),
    ("cluster_exchange", "exchange_kernel", "flip phase", "`acquire_wait(go, 0)` parity 0 -> (0) ^ 1", "order"),
])
def test_an_invalidate_and_a_constant_parity_are_tied_to_the_model(kernel, unit, operator, site, killer):
    """The tie reads what the census of kinds could not: each mbarrier.inval against the model's invalidates, and a
    wait's parity where the PTX holds it as a constant (a parity computed in a loop matches either)."""
    found = [(n, m) for n, m in mutate.mutants([kernel]) if m.unit.endswith(unit) and m.operator == operator
             and m.site == site]
    assert len(found) == 1, [m.site for n, m in mutate.mutants([kernel]) if m.operator == operator]
    names, m = found[0]
    assert mutate.cpu_killers(names, m, mutate.build(m.unit, m.source, names), configs=1)[0] == killer


def test_a_mutant_patches_every_module(tmp_path):
    """What tests/conftest.py does with MULTICTA_MUTANT: the copy replaces the original wherever the package holds it."""
    import subprocess
    import sys
    names, m = next((n, x) for n, x in mutate.mutants(["tile_stream"]) if x.unit.endswith("tile_stream_kernel"))
    path = mutate.write_mutant(m, tmp_path)
    code = ("import sys; from multicta_kernels import multicast, catalog; o = multicast.tile_stream_kernel; "
            f"from multicta_kernels.cli import mutate; mutate.load({str(path)!r}); "
            "assert multicast.tile_stream_kernel is not o and catalog.spec('tile_stream').fn is multicast.tile_stream_kernel")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parent.parent)


def test_every_survivor_says_why_a_cpu_misses_it_and_its_chapter_lists_it():
    """A survivor's row carries the reason no CPU check saw it; each chapter's pitfalls table
    (notebook.cpu_survivors) lists exactly the survivors of its own kernels and of the helpers they call."""
    from multicta_kernels.cli.mutants import why_survived
    from multicta_kernels.show import notebook
    r = _record()
    survivors = [row for row in r["rows"] if row[4] == "survived"]
    assert all(row[8] == why_survived(row[0], row[2], row[3]) and row[8] for row in survivors)
    assert all(row[8] == "" for row in r["rows"] if row[4] != "survived")
    assert why_survived("multicta_kernels.barriers.ping_pong_kernel", "flip phase", "x").startswith("the program runs")
    assert why_survived("m.k", "drop fence", "drop `sync_inits()`").startswith("equivalent in behaviour")
    assert "equivalent" in why_survived("m.k", "swap", "swap `tma.async_load(a` and `tma.async_load(b`")
    assert why_survived("multicta_kernels.two_cta.two_cta_mma_kernel", "drop fence", "drop `x`").endswith(
        "none has run them)")
    listed = {ch: max(0, notebook.cpu_survivors(ch).data.count("<tr>") - 1) for ch in ("barriers", "multicast", "softmax")}
    own = {ch: sum(1 for row in survivors if row[0].startswith(f"multicta_kernels.{ch}.")) for ch in listed}
    ring = sum(1 for row in survivors if row[0] == "multicta_kernels.gluon.ring.release")
    assert listed == {"barriers": own["barriers"], "multicast": own["multicast"] + ring, "softmax": own["softmax"]}
    with pytest.raises(ValueError, match="chapter 'nope': the chapter modules with kernels are barriers"):
        notebook.cpu_survivors("nope")


def test_a_mutant_whose_ptx_is_the_kernels_is_equivalent():
    """Swapping two loads onto one barrier: the compiler emits the same instructions in every configuration, so no
    test could ever tell the mutant from the kernel; it is recorded as equivalent and left out of the score."""
    r = _record()
    same = [row for row in r["rows"] if row[5] == mutate.SAME]
    assert same and all("equals the kernel's" in row[6] for row in same)
    assert all("lens.same_schedule" in row[6] for row in r["rows"] if row[5] in (mutate.REORDERED, mutate.FENCED))
    row = same[0]
    names, m = next((n, x) for n, x in mutate.mutants(row[1].split(",")) if x.key == f"{row[0]} | {row[2]} | {row[3]}")
    assert mutate.cpu_killers(names, m, mutate.build(m.unit, m.source, names))[0] == mutate.SAME


def test_a_pytest_that_cannot_run_is_no_kill(tmp_path):
    """pytest's own errors (exit 2 to 4: a usage or internal error, an import failing in conftest) are not a
    failing test: the harness refuses to record them as a kill (the H200's first GPU rerun counted them)."""
    names, m = next((n, x) for n, x in mutate.mutants(["tile_stream"]) if x.unit.endswith("tile_stream_kernel"))
    path = mutate.write_mutant(m, tmp_path)
    with pytest.raises(mutate.HarnessError, match="pytest exit 4"):
        mutate._pytest(["--no-such-option"], path, 120, "")


def test_the_gpu_record_is_a_rerun_of_cpu_survivors():
    """results/h200/mutation_gpu.json: CPU survivors run against their chapter's GPU tests on the H200, or said not
    run (a kernel that needs tcgen05). It ran before the last CPU changes: a survivor it does not hold is shown
    "not rerun" in the chapters' tables, and one the CPU now kills keeps its GPU row."""
    gpu = json.loads((RECORD.parent / "h200" / "mutation_gpu.json").read_text())
    cpu = {tuple(row[:4]): row for row in _record()["rows"]}
    assert gpu["gpu"] == "NVIDIA H200"
    for row in gpu["rows"]:
        assert tuple(row[:4]) in cpu, f"not a mutant of the CPU record: {row[:4]}"
        if row[5] is None and row[6]:
            assert row[6].startswith(("not run: its kernels", "GPU tests passed")), row[6]


def test_a_gpu_rerun_spends_no_device_time_on_kernels_the_gpu_cannot_run():
    from multicta_kernels.core import hardware
    with hardware.pretend((9, 0), "NVIDIA H200", 132):
        assert [mutate.runs_here([k]) for k in ("clc_matmul", "hopper_matmul", "softmax")] == [False, True, True]
    with hardware.pretend((10, 0), "NVIDIA B200", 148):
        assert [mutate.runs_here([k]) for k in ("clc_matmul", "hopper_matmul", "softmax")] == [True, False, True]


def test_every_mutant_has_a_key_of_its_own():
    """Two mutants of one line's twins (the two `multicast=True)` lines of clc_matmul's loader) once shared a key,
    and a rerun ran one of them under both names. Each key is now the mutant's own, the twins numbered in order."""
    keys = [m.key for _, m in mutate.mutants()]
    assert len(keys) == len(set(keys))
    twins = [k for k in keys if "clc_matmul.load_partition | mask | line `multicast=True)`" in k]
    assert [k.rsplit(" (", 1)[1] for k in twins] == ["1 of 2)", "2 of 2)"]


def test_a_line_without_a_loc_of_its_own_is_live_where_its_block_is():
    """Index arithmetic inside a branch leaves no ``.loc`` of its own, so the harness once took the Hopper multicast
    matmul's expect swapped with ``k = (t + STAGES) * BK`` for dead code and would not call its PTX (the kernel's
    very PTX, in all eight configurations) equivalent. A jit block runs whole: the expect beside it is live, so the
    arithmetic is. Not a call: the cost kernel's count_seen compiles to nothing without seen_ptr (no catalog
    configuration passes it), and its swap with the cluster barrier, a real bug with the check on, once became
    "same code" that way. The relaxed release's branch stays dead where no configuration compiles it."""
    from multicta_kernels.gluon.ring import RELEASE_CLUSTER_BARRIER

    def one(kernel, unit, text):
        found = [m for _, m in mutate.mutants([kernel]) if m.unit.endswith(unit) and text in m.site]
        assert len(found) == 1, [m.site for _, m in mutate.mutants([kernel]) if m.unit.endswith(unit)]
        return found[0]
    swap = one("hopper_multicast_matmul", "hopper_multicast_matmul_kernel", "and `k = (t + STAGES) * BK`")
    relaxed = one("tile_stream", "ring.release", "drop `hopper.cluster.barrier(relaxed=True)`")
    counted = one("barrier_cost", "barrier_cost_kernel", "swap `hopper.cluster.barrier()` and `count_seen(")
    matmul = catalog.compile("hopper_multicast_matmul", "sm_90a", num_ctas=2, release=RELEASE_CLUSTER_BARRIER).ptx
    stream = catalog.compile("tile_stream", "sm_90a", num_ctas=4, multicast=True, release=RELEASE_CLUSTER_BARRIER).ptx
    assert mutate.compiled_anywhere(swap, [matmul])
    assert not mutate.compiled_anywhere(relaxed, [stream, matmul])
    cost = catalog.compile("barrier_cost", "sm_90a", num_ctas=2, mode=2).ptx     # no seen_ptr: count_seen is empty
    assert not mutate.compiled_anywhere(counted, [cost])        # a call, not arithmetic: live only where a .loc says


def test_arithmetic_is_live_only_where_a_compiled_line_reads_it():
    """The review's case: ``off`` is read only under a constexpr branch that this configuration leaves out, so the
    line compiles to nothing and the same PTX proves nothing of a mutant that changes it. A ``.loc`` elsewhere in
    its block is not enough; a compiled line that reads ``off`` is. A call is never live by its neighbours."""
    src = ["def k(x_ptr, out_ptr, FLAG: tl.constexpr, DEBUG: tl.constexpr):\n",
           "    pid = tl.program_id(0)\n",
           "    if FLAG:\n",
           "        off = pid * 4\n",
           "        tl.store(out_ptr + pid, 1)\n",
           "        if DEBUG:\n",
           "            tl.store(x_ptr + off, 2)\n",
           "        count(out_ptr)\n"]
    assert not mutate._live_in(src, 10, [13], {11, 14})            # DEBUG off: the store of `off` is not compiled
    assert mutate._live_in(src, 10, [13], {11, 14, 16})            # DEBUG on: it is, and it reads `off`
    assert not mutate._live_in(src, 10, [17], {11, 14, 16})        # a call with no .loc of its own: no verdict
    assert mutate._assigned_by("        k = (t + STAGES) * BK  # next stage") == {"k"}
    assert mutate._assigned_by("        tm, tn = r.tile(lin)") == set()


def test_the_one_round_survivor_is_proved_everywhere_but_bf16_at_4_ctas():
    """Chapter 1's last one-round survivor, sync_inits() swapped with the row's load: lens.same_schedule proves it
    (the init sync moved) in four of its five configurations, for both targets; in bf16 at 4 CTAs the two programs
    hold the same instructions up to register names, and no one-to-one renaming maps one onto the other."""
    import collections

    from multicta_kernels import lens
    from multicta_kernels.lens.ptx import _VREG, code
    found = [(n, m) for n, m in mutate.mutants(["softmax_one_round"]) if m.operator == "swap"
             and m.unit.endswith("softmax_one_round_kernel") and "x = gl.load" in m.site and "sync_inits()" in m.site]
    assert len(found) == 1
    names, m = found[0]
    built = mutate.build(m.unit, m.source, names)
    unproved = []
    for params in catalog.registered()["softmax_one_round"]:
        for target in catalog.spec("softmax_one_round", **params).targets:
            k = catalog.compile("softmax_one_round", target, **params).ptx
            mu = lens.compile(mutate._spec_with("softmax_one_round", params, built), target).ptx
            why = lens.same_schedule(k, mu)
            if why:
                assert "the init sync moved across" in why, why
                continue
            unproved.append((params, target))
            lines = [collections.Counter(_VREG.sub("%", ln.strip()) for ln in code(t).splitlines()) for t in (k, mu)]
            assert lines[0] == lines[1], "the same instructions up to register names"
            assert lens.register_renaming(k, mu) is None, "... and no one-to-one renaming"
    assert unproved == [({"num_ctas": 4, "dtype": "bfloat16"}, t) for t in ("sm_90a", "sm_100a")]
