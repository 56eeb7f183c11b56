"""The tie by program (protocols.program): each kernel's Python run on the CPU does, op for op, what its protocol
model does (parities and shared-memory reads and writes included), and a kernel broken where the PTX ties are blind
(a parity computed at run time, an operation moved across a loop turn) no longer does."""
import pytest

from multicta_kernels import protocols
from multicta_kernels.cli import mutate
from multicta_kernels.protocols import models, program

MODELS = mutate.models()


def test_every_model_tied_to_a_kernel_says_what_sizes_it_unrolls():
    assert all(p.runtime is not None for p in MODELS), [p.name for p in MODELS if p.runtime is None]


@pytest.mark.parametrize("p", MODELS, ids=lambda p: p.name)
def test_the_kernel_does_what_its_model_does(p):
    assert program.tie(p) == []


def test_the_program_is_the_kernels_own_sequence():
    """CTA 0 of the 2-CTA ping-pong, round 0 then round 1: the parity flips, the reads and writes sit between the
    hand-offs, and CTA 0 releases every CTA with one lane each (arrive@0x2)."""
    got = program.run(models.ping_pong(2), cta=0, everything=False)["main"]
    round0 = ["write", "arrive@0x1", "wait=0", "arrive@0x2", "wait=0", "read", "arrive@0x1", "wait=0", "arrive@0x2",
              "wait=0"]
    assert got == round0 + [k.replace("wait=0", "wait=1") for k in round0] + ["invalidate"] * 4
    assert program.run(models.ping_pong(2), cta=1, everything=False)["main"][:3] == ["write", "arrive@0x1", "wait=0"]  # not the leader


def _mutant(kernel, unit, operator, site):
    """The first mutant of ``unit`` by ``operator`` whose site starts with ``site`` (the first of a line's twins)."""
    found = [(n, m) for n, m in mutate.mutants([kernel]) if m.unit.endswith(unit) and m.operator == operator
             and m.site.startswith(site)]
    assert found, [m.site for n, m in mutate.mutants([kernel]) if m.operator == operator]
    return found[0]


@pytest.mark.mutants
@pytest.mark.parametrize("kernel, unit, site", [
    ("ping_pong", "ping_pong_kernel", "`acquire_wait(go, phase)` parity"),
    ("hopper_matmul", "consumer_partition", "`mbarrier.wait(r.ready.index(s), phase)` parity"),
    ("primer_tma_ring", "tma_ring_kernel", "`mbarrier.wait(ready.index(slot), phase)` parity"),
    ("clc_matmul", "mma_partition", "`mbarrier.wait(p.load_ready.index(s), phase)` parity"),
])
def test_a_flipped_runtime_parity_is_killed_by_the_program(kernel, unit, site):
    """The PTX holds these parities in registers, so the ties by census and by order match either; the program
    computes them and sees wait=1 where the model waits on 0."""
    names, m = _mutant(kernel, unit, "flip phase", site)
    killer, detail = mutate.cpu_killers(names, m, mutate.build(m.unit, m.source, names), configs=1)
    assert killer == "program", (killer, detail)
    assert "wait=" in detail


@pytest.mark.mutants
def test_a_release_moved_after_the_reload_is_a_different_program():
    names, m = _mutant("tile_stream", "tile_stream_kernel", "move release", "")
    built = mutate.build(m.unit, m.source, names)
    fn = built[("multicta_kernels.multicast", "tile_stream_kernel")]
    bad = program.tie(models.tile_stream(4, "mbarrier", stages=4), fn=fn)
    assert bad and "the kernel does expect" in bad[0][2], bad


@pytest.mark.mutants
@pytest.mark.parametrize("kernel, unit, operator, site, rule", [
    ("ping_pong", "ping_pong_kernel", "drop fence", "drop `gl.barrier()`", "no gl.barrier() before it"),
    ("hopper_matmul", "consumer_partition", "move release", "move `mbarrier.arrive(r.empty.index((it - 1) % r.STAGES)` "
     "above `acc = hopper.warpgroup_mma_wait(0", "the kernel does arrive"),
])
def test_what_the_models_do_not_follow_the_program_does(kernel, unit, operator, site, rule):
    """A dropped CTA barrier before a cluster-scoped release (PTX ISA, memory consistency model: the other threads'
    reads are not ordered before thread 0's release), a release moved above the wgmma wait that retires the
    stage's reads."""
    names, m = _mutant(kernel, unit, operator, site)
    killer, detail = mutate.cpu_killers(names, m, mutate.build(m.unit, m.source, names))
    assert killer == "program" and rule in detail, (killer, detail)


@pytest.mark.mutants
@pytest.mark.parametrize("kernel, unit, operator, site, verdict", [
    # Triton 3.9 puts the proxy fence back itself: the very PTX of the kernel, in every configuration
    ("two_cta_mma", "two_cta_mma_kernel", "drop fence", "drop `fence_async_shared()`", mutate.SAME),
    # the compiler's own fence lands three arithmetic instructions later, still before the bar.sync: the kernel's
    # instructions, only independent ones in another order (lens.same_schedule)
    ("primer_tma_ring", "tma_ring_kernel", "drop fence", "drop `fence_async_shared()`", mutate.REORDERED),
    # the kernel's fence after the TMA store, and the compiler's before it: the kernel's code and one fence more
    ("primer_tma_ring", "tma_ring_kernel", "swap", "swap `fence_async_shared()` and `tma.async_store", mutate.FENCED),
    # A and B onto one barrier, in the other order: the program compares a run of loads as a set, and the PTX is the
    # kernel's with the two TMA loads (each behind its barrier and elect) issued in the other order
    ("hopper_multicast_matmul", "hopper_multicast_matmul_kernel", "swap", "swap `tma.async_load(a_desc", mutate.REORDERED),
    # a branch no configuration of the catalog compiles is dead here, not equivalent
    ("tile_stream", "release", "drop release", "drop `hopper.cluster.barrier(relaxed=True)`", None),
])
def test_what_no_test_could_tell_from_the_kernel_is_no_kill(kernel, unit, operator, site, verdict):
    names, m = _mutant(kernel, unit, operator, site)
    killer, detail = mutate.cpu_killers(names, m, mutate.build(m.unit, m.source, names))
    assert killer == verdict, (killer, detail)


@pytest.mark.mutants
@pytest.mark.parametrize("kernel, unit", [("blackwell_multicast_mma", "blackwell_multicast_mma_kernel"),
                                          ("clc_matmul", "mma_partition")])
def test_an_mma_commit_that_reaches_fewer_ctas_is_killed(kernel, unit):
    """tcgen05_mma(multicast=True) turned off: the commit reaches only the issuer's pair. The PTX's barrier
    operations are the same; the program counts the CTAs each commit reaches from the operands' CGA layouts."""
    names, m = _mutant(kernel, unit, "mask", "line `tcgen05_mma(")
    killer, detail = mutate.cpu_killers(names, m, mutate.build(m.unit, m.source, names), configs=1)
    assert killer == "program" and "the kernel does commit>2" in detail, (killer, detail)


def test_the_rules_read_one_partitions_program():
    assert [r for _, r, _ in program.rule_problems(["~generic read", "~release", "arrive@0x1"])] == ["cta barrier"]
    assert program.rule_problems(["~generic read", "~cta barrier", "~release"]) == []
    assert program.rule_problems(["~generic write", "cluster_barrier", "~release"]) == []     # it orders more
    assert program.rule_problems(["~generic write", "~async read", "tma_store"]) == []        # the compiler fences


def test_a_run_of_loads_is_compared_as_a_set():
    assert program._runs(["expect", "tma_load>2", "tma_load>1", "wait=0"]) == ["expect", "tma_load>1", "tma_load>2",
                                                                               "wait=0"]


def test_what_the_program_cannot_follow_is_refused_in_one_line():
    with pytest.raises(ValueError, match="has no kernel and runtime sizes to trace"):
        program.run(models.ping_pong(2, one_phase=True))          # a bug's model: no kernel of its own
    with pytest.raises(program.TraceError, match=r"a branch on a tensor at .*: only the GPU knows its value"):
        bool(program.OPAQUE)
    with pytest.raises(program.TraceError, match="a wait's parity depends on a tensor"):
        tr = program.Tracer(1, 0, 1)
        program._builtins(tr)["mbarrier"].wait(None, program.OPAQUE)


def test_the_protocols_package_names_it():
    assert protocols.program is program
