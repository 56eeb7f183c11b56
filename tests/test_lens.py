"""The PTX lens, on the CPU: every registered kernel compiles for each of its targets and shows
the instructions that carry its idea."""
import dataclasses
import re

import pytest

from multicta_kernels import catalog, lens

CASES = [(name, params, target)
         for name, examples in catalog.registered().items()
         for params in examples
         for target in catalog.spec(name, **params).targets]


@pytest.mark.parametrize("name, params, target", CASES, ids=lambda v: str(v))
def test_compiles_with_its_instructions(name, params, target):
    k = catalog.compile(name, target, **params)
    assert k.ptx.startswith("//") and ".entry" in k.ptx
    counts = k.census(k.spec.expect)
    missing = [p for p, n in counts.items() if n == 0]
    assert not missing, f"{name} {params} on {target} lacks {missing}"
    assert k.census(["ld.local", "st.local"]) == {"ld.local": 0, "st.local": 0}, "register spills"


@pytest.mark.parametrize("ctas", [2, 4, 8, 16])
def test_cluster_size_is_declared(ctas):
    for target in ("sm_90a", "sm_100a"):
        ptx = catalog.compile("softmax", target, num_ctas=ctas).ptx
        assert f".reqnctapercluster {ctas}" in ptx


def test_one_cta_has_no_cluster_code():
    counts = catalog.compile("softmax", "sm_90a", num_ctas=1).census(
        [".reqnctapercluster", "mapa", "shared::cluster", "barrier.cluster"])
    assert set(counts.values()) == {0}


def test_fused_softmax_has_fewer_cluster_barriers():
    for target in ("sm_90a", "sm_100a"):
        two = catalog.compile("softmax_two_pass", target, num_ctas=4).census(["barrier.cluster.wait"])
        one = catalog.compile("softmax", target, num_ctas=4).census(["barrier.cluster.wait"])
        assert one["barrier.cluster.wait"] < two["barrier.cluster.wait"]


def test_alignment_hint_keeps_vector_loads():
    spec = catalog.spec("softmax", num_ctas=1, N=3000)
    scalar = dataclasses.replace(spec, constexprs={**spec.constexprs, "ALIGN": 1})
    aligned = lens.compile(spec, "sm_90a").census(["ld.global.v4", "ld.global.b32"])
    unaligned = lens.compile(scalar, "sm_90a").census(["ld.global.v4", "ld.global.b32"])
    assert aligned["ld.global.v4"] > 0 and aligned["ld.global.b32"] == 0
    assert unaligned["ld.global.v4"] == 0 and unaligned["ld.global.b32"] > 0


def test_compile_error_is_one_clear_line():
    spec = catalog.spec("softmax", num_ctas=4)
    broken = dataclasses.replace(spec, options={**spec.options, "num_ctas": 2})   # layout says 4 CTAs
    with pytest.raises(ValueError, match="exactly 1 bases"):                        # refused before Triton
        lens.compile(broken, "sm_90a")
    from multicta_kernels import barriers
    with pytest.raises(lens.LensCompileError) as err:                               # the compiler's own error
        lens.compile(barriers.warp_specialize_spec("init_inside"), "sm_90a")
    assert "does not compile for sm_90a" in str(err.value) and "warp_specialize" in err.value.diagnostic
    assert "\n" not in err.value.diagnostic and err.value.diagnostic


def test_unknown_names_and_targets():
    with pytest.raises(KeyError, match="in the catalog"):
        catalog.spec("no_such_kernel")
    with pytest.raises(ValueError, match="unknown target"):
        catalog.compile("softmax", "sm_80")


def test_census_and_excerpt():
    ptx = "//\n.visible .entry k()\n{\n\t.reg .b32 %r<3>;\n$L1:\n\tmov.u32 %r1, 1;\n@%p1 bra $L1;\n\tmov.u32 %r2, 2;\n\tret;\n}\n"
    assert lens.census(ptx) == {"mov.u32": 2, "bra": 1, "ret": 1}
    assert lens.census(ptx, ["mov", "ret"]) == {"mov": 2, "ret": 1}
    ex = lens.excerpt(ptx, "bra", context=1)
    assert ">    7  @%p1 bra $L1;" in ex and "mov.u32 %r1" in ex
    assert lens.excerpt(ptx, "nothing").startswith("// no line")


def test_bad_cluster_sizes_and_layouts_are_refused_before_triton():
    spec = catalog.spec("softmax", num_ctas=4)
    with pytest.raises(ValueError, match="power of two from 1 to 16"):
        lens.compile(dataclasses.replace(spec, options={**spec.options, "num_ctas": 32}), "sm_90a")
    from triton.experimental.gluon import language as gl
    bad = gl.BlockedLayout([1, 1, 4], [1, 1, 32], [1, 1, 4], [2, 1, 0], cga_layout=[[0, 3, 0], [0, 2, 0]])
    with pytest.raises(ValueError, match="constexpr 'layout'.*should be 1"):
        lens.compile(dataclasses.replace(spec, constexprs={**spec.constexprs, "layout": bad}), "sm_90a")


def test_a_compile_that_aborts_becomes_one_line_with_tritons_message():
    """What validation cannot know (here a linear layout Triton rejects by aborting) is compiled in a
    child process: the reader gets Triton's own words, and the notebook survives."""
    from triton.experimental.gluon import language as gl
    spec = catalog.spec("softmax", num_ctas=2, N=64, num_warps=1)
    bad = gl.DistributedLinearLayout([[0, 0, 1], [0, 0, 2]], [[0, 0, 4], [0, 0, 8], [0, 0, 16], [0, 0, 0], [0, 0, 0]],
                                     [], [[0, 1, 1]], [1, 2, 32])
    with pytest.raises(lens.LensCompileError, match="aborted.*at most one dimension") as err:
        lens.compile(dataclasses.replace(spec, constexprs={**spec.constexprs, "layout": bad}), "sm_90a")
    assert "\n" not in str(err.value)


def test_specialise_turns_ones_into_constants_as_a_launch_does():
    spec = catalog.spec("softmax", num_ctas=2)
    s = lens.specialise(spec, M=1, n_div=4096)
    assert s.signature["M"] == "constexpr" and s.constexprs["M"] == 1
    assert s.signature["n_div"] == "i32" and "n_div" in s.divisible
    with pytest.raises(KeyError, match="no integer argument"):
        lens.specialise(spec, layout=1)


# ------------------------------------------------------------------ reading what a change did (chapters 2 to 5)

PTX = """//
.visible .entry k()
{
\tmov.u32 \t%r1, %cluster_ctarank;
\tand.b32 \t%r2, %r1, 2;
\tsetp.eq.b32 \t%p1, %r2, 0;
\tmov.u32 \t%r3, %tid.x;
\tsetp.lt.u32 \t%p2, %r3, 4;
\tand.pred \t%p3, %p1, %p2;
\tmbarrier.init.shared::cta.b64 [%r4], 4;
\tmbarrier.init.shared::cta.b64 [%r5], 1;
$L__BB0_1:
\tmbarrier.arrive.expect_tx.shared::cta.b64 _, [%r4], 1024;
\t@%p3 mbarrier.arrive.shared::cluster.b64 _, [%r6];
\t@%p1 bra \t$L__BB0_1;
\tret;
}
"""


def test_init_counts_and_operand_census():
    assert lens.mbarrier_init_counts(PTX) == [4, 1]
    c = lens.operand_census(PTX)
    assert c["mbarrier.init.shared::cta.b64 (count 4)"] == 1 == c["mbarrier.init.shared::cta.b64 (count 1)"]
    assert c["mbarrier.arrive.expect_tx.shared::cta.b64 (1024 bytes)"] == 1 and c["mov.u32"] == 2
    changed = PTX.replace("[%r5], 1;", "[%r5], 4;").replace("\tret;", "\tmov.u32 \t%r9, 0;\n\tret;")
    assert lens.census_changes(PTX, changed) == [["mov.u32", 2, 3, 1], ["mbarrier.init.shared::cta.b64 (count 4)", 1, 2, 1],
                                                 ["mbarrier.init.shared::cta.b64 (count 1)", 1, 0, -1]]
    assert lens.census_changes(PTX, PTX) == []


def test_predicate_chain_issuing_ctas_and_loop_body():
    chain = lens.predicate_chain(PTX, "mbarrier.arrive.shared::cluster")
    assert [no for no, _ in chain] == [4, 5, 6, 7, 8, 9, 14]         # both predicates, back to their registers
    assert lens.issuing_ctas(chain, 4) == [0, 1]                      # (rank & 2) == 0
    with pytest.raises(ValueError, match="guarded line"):
        lens.predicate_chain(PTX, "mbarrier.arrive.shared::cluster", hit=1)
    with pytest.raises(ValueError, match="does not read %cluster_ctarank"):
        lens.issuing_ctas([(8, "setp.lt.u32 %p2, %r3, 4;")], 4)
    body = lens.loop_body(PTX).splitlines()
    assert body[0] == "$L__BB0_1:" and "bra" in body[-1] and len(body) == 4
    with pytest.raises(ValueError, match="no loop"):
        lens.loop_body(PTX.replace("\t@%p1 bra \t$L__BB0_1;\n", ""))


def test_with_kernel_keeps_only_the_copys_arguments():
    from multicta_kernels import multicast as mc
    spec = mc.tile_stream_spec(num_ctas=4)
    same = lens.with_kernel(spec, mc.tile_stream_kernel, STAGES=2)
    assert same.constexprs["STAGES"] == 2 and same.signature == spec.signature and same.name == "tile_stream (your copy)"
    with pytest.raises(KeyError, match="no argument"):
        lens.with_kernel(spec, mc.tile_stream_kernel, stages=2)


def test_sass_census_reads_what_ptxas_makes():
    k = catalog.compile("tile_stream", "sm_90a", num_ctas=4, multicast=True, release=0)     # the cluster barrier
    try:
        sass = lens.sass_census(k.ptx)
    except OSError as err:                       # an installation without ptxas or cuobjdump
        pytest.skip(f"no ptxas or cuobjdump here: {err}")
    assert sass["UCGABAR_ARV"] >= 1 and sass["MEMBAR.ALL.GPU"] >= 1


def test_same_code_ignores_where_the_source_lives():
    """Triton's cache key ignores the source path while the PTX names it: a kernel compiled in another checkout
    (a teacher's second clone, a CI runner's persistent cache) must still compare equal, and a real change not."""
    from multicta_kernels import catalog
    ptx = catalog.compile("softmax", "sm_90a", num_ctas=4).ptx
    elsewhere = ptx.replace("multicta_kernels/", "other-clone/multicta_kernels/")
    assert elsewhere != ptx and lens.same_code(elsewhere, ptx)
    changed = ptx.replace("barrier.cluster.wait.aligned;", "barrier.cluster.wait;", 1)
    assert not lens.same_code(changed, ptx)


_BLOCK = """\
\tst.shared.v2.b32 \t[%r4+16384], {%r67, %r66};
\tfence.proxy.async.shared::cta;
$L__tmp6:
\tdiv.s32 \t%r132, %r137, %r16;
\tshl.b32 \t%r39, %r132, 6;
\tmad.lo.s32 \t%r38, %r5, %r132, %r136;
\tbar.sync \t0;
\t@%p22 cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%rd4, {%r38, %r39}], [%r40];
\tcp.async.bulk.commit_group;
\tadd.s32 \t%r137, %r137, 1;
\tsetp.ne.b32 \t%p27, %r6, %r137;
\t@%p27 bra \t$L__BB0_2;
"""


def _moved(text, line, after):
    lines = text.splitlines(True)
    moved = next(ln for ln in lines if line in ln)
    lines.remove(moved)
    at = next(i for i, ln in enumerate(lines) if after in ln)
    lines.insert(at + 1, moved)
    return "".join(lines)


def test_same_schedule_proves_only_what_no_thread_can_tell_apart():
    """The mutation harness counts a mutant equivalent when its PTX is the kernel's up to independent instructions
    in another order, or with fences more. Moving a fence past register arithmetic (what Triton 3.9's proxy-fence
    pass does when the kernel's own fence is dropped) is no change; moving it past a memory operation, a barrier
    or an instruction that writes a register a later one reads is."""
    k = _BLOCK
    assert lens.same_schedule(k, k) == "the same code"
    assert lens.same_schedule(k, k.replace("$L__tmp6:", "$L__tmp9:")) == "the same code"   # a debug label
    reordered = _moved(k, "fence.proxy", "mad.lo")                       # past arithmetic: before the bar.sync
    assert lens.same_schedule(k, reordered) == "the same instructions, only independent ones in another order"
    assert lens.same_schedule(k, _moved(k, "fence.proxy", "bar.sync")) == ""            # past the barrier
    assert lens.same_schedule(k, _moved(k, "st.shared", "fence.proxy")) == ""           # the write after the fence
    assert lens.same_schedule(k, _moved(k, "shl.b32", "bar.sync")).startswith("the same instructions")  # before its reader
    assert lens.same_schedule(k, _moved(k, "shl.b32", "cp.async.bulk.tensor")) == ""    # its reader: after it
    assert lens.same_schedule(k, _moved(k, "add.s32", "setp.ne")) == ""                 # the compare reads %r137
    assert lens.same_schedule(k, k.replace("%r132, 6", "%r131, 6")) == ""               # another register
    more = _moved(k, "fence.proxy", "mad.lo").replace("commit_group;\n", "commit_group;\n\tfence.proxy.async.shared::cta;\n")
    assert lens.same_schedule(k, more) == "the kernel's code and 1 more fence"
    assert lens.same_schedule(k, k.replace("\tfence.proxy.async.shared::cta;\n", "")) == ""  # a fence fewer
    assert lens.same_schedule(k, k.replace("commit_group;\n", "commit_group;\n\tbar.sync \t0;\n")) == ""  # no fence
    assert lens.same_schedule(k, k.replace("$L__BB0_2", "$L__BB0_3")) == ""             # another branch target
    # an epilogue of eight subtiles, a fence more after each store's commit: eight among sixteen, found per block
    subtiles = "".join(f"\tst.shared.b32 \t[%r{i}], %r{i + 100};\n\tfence.proxy.async.shared::cta;\n\tbar.sync \t0;\n"
                       f"\tcp.async.bulk.commit_group;\n" for i in range(8))
    fenced = subtiles.replace("commit_group;\n", "commit_group;\n\tfence.proxy.async.shared::cta;\n")
    assert lens.same_schedule(subtiles, fenced) == "the kernel's code and 8 more fences"
    assert lens.same_schedule(subtiles, _moved(fenced, "[%r3]", "[%r4]")) == ""        # and a store moved
    timed = "\tmov.u64 \t%rd9, %globaltimer;\n" + k
    assert lens.same_schedule(timed, _moved(timed, "globaltimer", "bar.sync")) == ""    # a clock read is no arithmetic


def _written_first(text):
    """``text`` after a line that writes each register it reads but never writes (a loop body's inputs): a register
    no line writes is an input, whose name is its meaning, so the reader renames none (a second review's case)."""
    from multicta_kernels.lens.ptx import _REG, _destination
    written = {r for ln in text.splitlines() for r in _destination(ln.strip())}
    free = sorted({r for r in _REG.findall(text) if r.startswith("%r") and not r.startswith("%rd")} - written)
    return "".join(f"\tmov.u32 \t{r}, {n};\n" for n, r in enumerate(free)) + text


def test_same_schedule_sees_through_renumbered_registers_only_one_to_one():
    """A source-level swap makes LLVM number its registers otherwise (the Hopper matmul's release swapped with the
    tile arithmetic): the same program, which the reader proves by renaming the other's virtual registers one to
    one and class to class, then checking as before. Two registers merged into one, a register of another class,
    or a renaming that hides a moved memory operation is no proof."""
    import re
    k = _written_first(_BLOCK)
    shifted = re.sub(r"%r(\d+)", lambda m: f"%r{int(m.group(1)) + 1000}", k)
    assert lens.same_schedule(k, shifted) == "the same code, registers renamed"
    assert lens.register_renaming(k, shifted)["%r1132"] == "%r132"
    assert lens.same_schedule(k, _moved(shifted, "fence.proxy", "mad.lo")) == \
        "the same instructions, only independent ones in another order, registers renamed"
    swapped = k.replace("%r39", "%rX").replace("%r38", "%r39").replace("%rX", "%r38")     # two names exchanged
    assert lens.same_schedule(k, swapped) == "the same code, registers renamed"
    assert lens.same_schedule(k, _moved(shifted, "fence.proxy", "bar.sync")) == ""      # past the barrier
    assert lens.same_schedule(k, k.replace("%r137, %r16", "%r136, %r16")) == ""          # two registers made one
    assert lens.same_schedule(k, k.replace("%r5, %r132", "%rd5, %r132")) == ""           # another class
    assert lens.register_renaming(k, k + "\tadd.s32 \t%r900, %r901, 1;\n") is None       # a register more
    # a review's reproducer: an inline-asm scope that declares %r<5> hides the outer %r1 inside it, so renaming
    # %r1 to %r7 turns the scope's write of its own %r1 into a write of the outer %r7 (ptxas: stores 1, not 5)
    head = ".visible .entry k(\n.param .u64 k_param_0\n)\n{\n.reg .b32 %r<10>;\n.reg .b64 %rd<3>;\n" \
           "ld.param.u64 %rd1, [k_param_0];\n"
    body = "mov.u32 %r{0}, 1;\n{{\n.reg .b32 %r<5>;\nmov.u32 %r{0}, 5;\n}}\nst.global.u32 [%rd1], %r{0};\nret;\n}}\n"
    assert lens.register_renaming(head + body.format(7), head + body.format(1)) is None
    assert lens.same_schedule(head + body.format(7), head + body.format(1)) == ""


_EXPECT = "\tbar.sync \t0;\n\t@%p6 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r10], 24576;\n"
_LOAD_A = ("\tbar.sync \t0;\n\telect.sync \t%r38|%p18, -1;\n\tand.pred \t%p7, %p19, %p18;\n{mov}"
           "\t@%p7 cp.async.bulk.tensor.2d.shared::cta.global.mbarrier::complete_tx::bytes [%r13], [%rd22, {{%r14, %r74}}], "
           "[%r10];\n")
_LOAD_B = ("\tbar.sync \t0;\n\telect.sync \t%r41|%p20, -1;\n\tand.pred \t%p8, %p1, %p20;\n{mov}"
           "\t@%p8 cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%r81], "
           "[%rd23, {{%r79, %r11}}], [%r10], %rs1;\n")
_MOV = "\tmov.b32 \t%r11, 0;\n"
_WAIT = "\tbar.sync \t0;\n\tmbarrier.try_wait.parity.shared::cta.b64 \t%p9, [%r10], %r5;\n"


def test_same_schedule_lets_two_tma_loads_trade_places_and_nothing_else():
    """Triton puts a CTA barrier and an elect before each TMA load, so a mutant that issues a tile's two loads in
    the other order is two such groups exchanged (the Hopper, Blackwell and CLC matmuls' loads of A and B onto one
    barrier): the same program, since a load's bytes are ordered only by its completion on the mbarrier. Not the
    same: a load moved before its expect, two TMA stores exchanged, groups that share a register one computes, a
    group with a shared-memory read in it, or groups with a wait between them. A TMA load writes no register, so
    arithmetic that reads its operands may move across it, and arithmetic that writes one may not."""
    kernel = _EXPECT + _LOAD_A.format(mov=_MOV) + _LOAD_B.format(mov="") + _WAIT
    mutant = _EXPECT + _LOAD_B.format(mov=_MOV) + _LOAD_A.format(mov="") + _WAIT   # the compiler's mov goes first
    assert lens.same_schedule(kernel, mutant) == "the same instructions, TMA loads issued in another order"
    assert lens.same_schedule(kernel, _LOAD_A.format(mov=_MOV) + _EXPECT + _LOAD_B.format(mov="") + _WAIT) == ""
    store = lambda t: re.sub(r"cp\.async\.bulk\.tensor\.2d\.shared::\w+\.global\.\S+ (\[[^]]*\]), (\[[^]]*\])",  # noqa: E731
                             r"cp.async.bulk.tensor.2d.global.shared::cta.bulk_group \2, \1", t)
    assert store(kernel) != kernel and lens.same_schedule(store(kernel), store(mutant)) == ""
    shared = mutant.replace("%p8, %p1, %p20", "%p8, %p7, %p20")          # B's predicate now reads A's
    assert lens.same_schedule(kernel.replace("%p8, %p1, %p20", "%p8, %p7, %p20"), shared) == ""
    read = "\tld.shared.b32 \t%r90, [%r13];\n"
    assert lens.same_schedule(kernel.replace(_MOV, _MOV + read), mutant.replace(_MOV, _MOV + read)) == ""
    after = kernel.replace("[%r10];\n", "[%r10];\n\tadd.s32 \t%r90, %r13, 64;\n", 1)        # reads A's operand
    assert lens.same_schedule(after, _moved(after, "%r90, %r13", "and.pred \t%p7")).startswith("the same instr")
    clobber = kernel.replace("[%r10];\n", "[%r10];\n\tadd.s32 \t%r13, %r90, 64;\n", 1)     # writes it
    assert lens.same_schedule(clobber, _moved(clobber, "%r13, %r90", "and.pred \t%p7")) == ""
    waited = lambda a, b: _EXPECT + a + _WAIT + b                                                  # noqa: E731
    assert lens.same_schedule(waited(_LOAD_A.format(mov=_MOV), _LOAD_B.format(mov="")),
                              waited(_LOAD_B.format(mov=_MOV), _LOAD_A.format(mov=""))) == ""


def test_same_schedule_refuses_what_it_cannot_follow():
    """A fresh-eyes review found four ways the reader once called a change equivalent that a thread could see;
    each is refused now: registers an inline-assembly scope declares without a %, a register an asynchronous
    operation is still writing (a tcgen05.ld or wgmma result read before its wait), an instruction written with a
    tab and no spaces, and two instructions on one line."""
    def moved(lines, order):
        return "\n".join(lines[i] for i in order)
    scope = ["{", "{", ".reg .pred p;", "setp.ne.b32 p, %r1, 0;", "@p st.shared.b32 [%r2], %r3;",   # in a body
             "setp.ne.b32 p, %r4, 0;", "@p st.shared.b32 [%r5], %r6;", "}", "}"]
    assert lens.same_schedule("\n".join(scope), moved(scope, [0, 1, 2, 3, 5, 4, 6, 7, 8])) == ""
    tc = ["\ttcgen05.ld.sync.aligned.32x32b.x2.b32 {%r1, %r2}, [%r9 + 0];", "\ttcgen05.wait::ld.sync.aligned;",
          "\tcvt.rn.bf16x2.f32 \t%r3, %r2, %r1;", "\tst.shared.b32 \t[%r8], %r3;"]
    assert lens.same_schedule("\n".join(tc), moved(tc, [0, 2, 1, 3])) == ""
    mma = ["\twgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f1, %f2}, %rd1, %rd2, 1, 1, 1, 0, 0;",
           "\twgmma.commit_group.sync.aligned;", "\twgmma.wait_group.sync.aligned 0;", "\tmul.f32 \t%f3, %f1, %f2;",
           "\tst.shared.f32 \t[%r8], %f3;"]
    assert lens.same_schedule("\n".join(mma), moved(mma, [0, 3, 1, 2, 4])) == ""
    tab = ["\tmov.u32\t%r1,%r2;", "\tst.shared.b32 \t[%r3], %r1;"]
    assert lens.same_schedule("\n".join(tab), moved(tab, [1, 0])) == ""
    br = ["\t@%p1\tbra\t$L__BB0_1;", "\tadd.s32 \t%r5, %r6, 1;", "$L__BB0_1:", "\tst.shared.b32 \t[%r3], %r5;"]
    assert lens.same_schedule("\n".join(br), moved(br, [1, 0, 2, 3])) == ""
    two = ["\tmov.u32 %r1, 0; st.shared.b32 [%r2], %r1;", "\tbar.sync \t0;", "\tld.shared.b32 \t%r5, [%r4];"]
    assert lens.same_schedule("\n".join(two), moved(two, [1, 2, 0])) == ""
    fenced = ["\tst.shared.b32 \t[%r4], %r9;", "\tbar.sync \t0;"]
    assert lens.same_schedule("\n".join(fenced), "\n".join(["\tfence.acq_rel.cta; st.shared.b32 [%r4], %r9;"]
                                                          + fenced)) == ""


_SYNC = ("\telect.sync \t%r20|%p20, -1;\n\tand.pred \t%p21, %p1, %p20;\n\t@%p21 fence.mbarrier_init.release.cluster ;\n"
         "\tbarrier.cluster.arrive.relaxed.aligned;\n\tbarrier.cluster.wait.aligned;\n")
_INIT = "\tsetp.lt.u32 \t%p1, %r0, 32;\n\t@%p1 mbarrier.init.shared::cta.b64 [%r1], 1;\n"
_LOADS = ("\t@%p2 ld.global.v4.b32 { %r2, %r3, %r4, %r5 }, [ %rd1 + 0 ];\n\tmax.f32 \t%r6, %r2, %r3;\n"
          "\tst.shared.b32 \t[%r7], %r6;\n\tbar.sync \t0;\n\tld.shared.b32 \t%r8, [%r9];\n")
_USE = ("\t@%p3 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r1], 16;\n"
        "\t@%p3 st.async.weak.shared::cluster.mbarrier::complete_tx::bytes.b32 [ %r10 + 0 ], %r8, [ %r11 + 0 ];\n")


def test_same_schedule_moves_the_init_sync_only_across_what_it_does_not_order():
    """The init sync (``fence.mbarrier_init``, a relaxed cluster arrive, the wait) orders the inits and nothing else
    (PTX ISA "barrier.cluster": .relaxed, no ordering of earlier accesses; "membar/fence": fence.mbarrier_init),
    so Triton's own sync at the first use and ``sync_inits()`` after the loads are one program. Refused: the sync
    moved past an mbarrier operation, an access to another CTA's memory, a fence or a TMA load; a full (release)
    arrive instead of the relaxed one; a sync that is not the first cluster barrier or that a branch skips."""
    kernel = _INIT + _LOADS + _SYNC + _USE
    assert lens.same_schedule(kernel, _INIT + _SYNC + _LOADS + _USE).startswith(
        "the same instructions, the init sync moved across 4 weak loads, stores, warp exchanges and CTA barriers")
    for between in ("\t@%p4 mbarrier.arrive.shared::cta.b64 _, [%r12];\n",
                    "\tld.shared::cluster.b32 \t%r13, [%r14];\n", "\tfence.proxy.async.shared::cta;\n",
                    "\t@%p4 cp.async.bulk.tensor.2d.shared::cta.global.mbarrier::complete_tx::bytes [%r15], "
                    "[%rd2, {%r16, %r17}], [%r1];\n", "\tmapa.shared::cluster.u32 \t%r18, %r19, %r20;\n"):
        assert lens.same_schedule(_INIT + between + _LOADS + _SYNC + _USE,
                                  _INIT + _SYNC + between + _LOADS + _USE) == "", between
    assert lens.same_schedule(kernel, _SYNC + _INIT + _LOADS + _USE) == ""                  # before the init
    assert lens.same_schedule(kernel, _INIT + _LOADS + _USE + _SYNC) == ""                  # after the first use
    full = lambda t: t.replace("arrive.relaxed.aligned", "arrive.aligned")                 # noqa: E731
    assert lens.same_schedule(full(kernel), full(_INIT + _SYNC + _LOADS + _USE)) == ""
    earlier = "\tbarrier.cluster.arrive.aligned;\n\tbarrier.cluster.wait.aligned;\n"
    assert lens.same_schedule(earlier + kernel, earlier + _INIT + _SYNC + _LOADS + _USE) == ""
    skipped = lambda t: t.replace(_SYNC, "\t@%p9 bra \t$L__BB0_1;\n" + _SYNC + "$L__BB0_1:\n")  # noqa: E731
    assert lens.same_schedule(skipped(kernel), skipped(_INIT + _SYNC + _LOADS + _USE)) == ""


def test_same_schedule_counts_a_cta_barrier_twice_in_a_row_once():
    """Two ``bar.sync 0`` with nothing but register arithmetic between them are one (PTX ISA "bar, barrier": every
    thread of the CTA meets the same aligned barrier, and the second orders no access the first does not). Not
    one: a shared-memory write, a warp shuffle or an mbarrier operation between them, a predicated barrier, a named
    barrier of some warps."""
    two = "\tst.shared.b32 \t[%r1], %r2;\n\tbar.sync \t0;\n\tadd.s32 \t%r3, %r4, 1;\n\tbar.sync \t0;\n" \
          "\tld.shared.b32 \t%r5, [%r3];\n"
    one = two.replace("\tbar.sync \t0;\n\tld.shared", "\tld.shared")
    assert lens.same_schedule(two, one) == "the same instructions, a CTA barrier twice in a row counted once"
    for between in ("\tst.shared.b32 \t[%r6], %r2;\n", "\tshfl.sync.bfly.b32 \t%r7, %r2, 16, 31, -1;\n",
                    "\t@%p1 mbarrier.arrive.expect_tx.shared::cta.b64 _, [%r8], 16;\n"):
        k = two.replace("\tadd.s32", between + "\tadd.s32")
        assert lens.same_schedule(k, k.replace("\tbar.sync \t0;\n\tld.shared", "\tld.shared")) == "", between
    for other in ("\t@%p1 bar.sync \t0;\n", "\tbar.sync \t1, 128;\n"):
        k = two.replace("\tadd.s32 \t%r3, %r4, 1;\n\tbar.sync \t0;\n", "\tadd.s32 \t%r3, %r4, 1;\n" + other)
        assert lens.same_schedule(k, k.replace(other, "")) == "", other


def test_same_schedule_allows_a_relaxed_cluster_barrier_more_only_first_and_unskipped():
    """A relaxed cluster barrier before any other, in the first straight-line block, orders no access and every
    thread reaches it: slower at most (what ``sync_inits()`` before the inits compiles to, beside Triton's own
    sync). Refused: a full (release) barrier more, one after another cluster barrier, one after a branch."""
    kernel = "\tmov.u32 \t%r1, %tid.x;\n" + _INIT + _SYNC + _LOADS + _USE
    pair = "\tbarrier.cluster.arrive.relaxed.aligned;\n\tbarrier.cluster.wait.aligned;\n"
    more = pair + kernel
    assert lens.same_schedule(kernel, more) == \
        "the same instructions, a relaxed cluster barrier more before any branch or wait"
    assert lens.same_schedule(kernel, more.replace("arrive.relaxed.aligned;\n\tbarrier.cluster.wait.aligned;\n\tmov",
                                                   "arrive.aligned;\n\tbarrier.cluster.wait.aligned;\n\tmov")) == ""
    assert lens.same_schedule(kernel, kernel.replace(_LOADS, pair + _LOADS)) == ""          # after the init sync
    branchy = "\t@%p9 bra \t$L__BB0_1;\n$L__BB0_1:\n" + kernel
    assert lens.same_schedule(branchy, branchy.replace("$L__BB0_1:\n", "$L__BB0_1:\n" + pair)) == ""


def test_same_schedule_refuses_the_barrier_moves_a_review_found():
    """A fresh-eyes review found ways the barrier relations once excused a different program; each is refused now:
    the sync's predicate redefined or defined after it, a predicated or named barrier crossed (a deadlock), a
    release fence or membar before the relaxed arrive (then a release: the PTX ISA's own example), an acquire load
    or release store crossed, a spare relaxed barrier after a wait, a non-aligned ``barrier.sync 0`` counted once
    (it may pair with one on another path), a spare barrier in a ``.func`` or a sync behind a ``call``, a branch
    written ``bra L ;``, and a device function's parameter (read-write) taken as read-only."""
    moved = lambda head, mid: lens.same_schedule(head + _SYNC + mid + _USE, head + mid + _SYNC + _USE)  # noqa: E731
    redefined = "\tsetp.eq.u32 \t%p1, %r31, 0;\n"
    assert lens.same_schedule(_INIT + redefined + _SYNC + _USE, _INIT + _SYNC + redefined + _USE) == ""
    late = _SYNC.replace("%p21, %p1, %p20", "%p21, %p5, %p20")
    define = "\tsetp.eq.u32 \t%p5, %r31, 0;\n"
    assert lens.same_schedule(_INIT + define + late + _USE, _INIT + late + define + _USE) == ""
    for mid in ("\t@%p4 barrier.sync \t1, 64;\n", "\t@%p4 bar.sync \t0;\n", "\tbar.sync \t1, 64;\n",
                "\tld.global.acquire.gpu.u32 \t%r3, [%rd2];\n", "\tst.global.release.gpu.u32 \t[%rd2], %r3;\n",
                "\tld.volatile.global.u32 \t%r3, [%rd2];\n"):
        assert moved(_INIT, mid) == "", mid
    load = "\tld.global.u32 \t%r3, [%rd2];\n"
    assert moved(_INIT, load).startswith("the same instructions")                        # the control
    for fence in ("\tfence.acq_rel.cluster;\n", "\tmembar.gl;\n"):
        assert moved("\tst.global.u32 \t[%rd1], %r2;\n" + fence + _INIT, load) == "", fence
    skip, end = _INIT + "\t@%p9 bra \t$L__BB0_1 ;\n", "$L__BB0_1:\n\tret;\n"             # skips the sync
    assert lens.same_schedule(skip + _SYNC + load + _USE + end, skip + load + _SYNC + _USE + end) == ""
    called = ".visible .entry k()\n{\n\t@%p9 call.uni g, ();\n" + _INIT
    assert moved(called, load) == ""
    pair = "\tbarrier.cluster.arrive.relaxed.aligned;\n\tbarrier.cluster.wait.aligned;\n"
    waits = "\tmov.u32 \t%r1, %tid.x;\n\t@%p4 barrier.sync \t1, 64;\n"
    assert lens.same_schedule(waits + _INIT + _SYNC + _USE, waits + pair + _INIT + _SYNC + _USE) == ""
    func = ".func f()\n{\n\tmov.u32 \t%r9, %tid.x;\n{PAIR}\tret;\n}\n"
    entry = ".visible .entry k()\n{\n\tmov.u32 \t%r1, %tid.x;\n\t@%p1 bra \t$L__BB0_1;\n\tcall.uni f, ();\n" \
            "$L__BB0_1:\n\tret;\n}\n"
    assert lens.same_schedule(func.replace("{PAIR}", "") + entry, func.replace("{PAIR}", pair) + entry) == ""
    two = "\tst.shared.b32 \t[%r1], %r2;\n\tbarrier.sync \t0;\n\tbarrier.sync \t0;\n\tld.shared.b32 \t%r5, [%r3];\n"
    assert lens.same_schedule(two, two.replace("\tbarrier.sync \t0;\n", "", 1)) == ""
    f = ".func f(\n.param .b32 f_param_0\n)\n{{\n{body}\tret;\n}}\n"
    st, ld = "\tst.param.b32 \t[f_param_0], %r1;\n", "\tld.param.b32 \t%r2, [f_param_0];\n"
    use = "\tst.global.b32 \t[%rd1], %r2;\n"
    assert lens.same_schedule(f.format(body=st + ld + use), f.format(body=ld + st + use)) == ""


def test_same_schedule_refuses_what_a_second_review_found():
    """A second review found seven more: the init sync with another guard on its fence, a second init sync (after a
    release fence) moved, a second ``.entry`` in the file, a spare relaxed barrier at a loop head, a register declared
    without a ``%`` in the function's body, a ``{`` on the ``.entry`` line (the depth counted one too low), a ``/* */``
    comment hiding a barrier; and a renaming of registers no line writes. Each is refused now."""
    load = "\tld.global.u32 \t%r3, [%rd2];\n"
    plain = "\tfence.mbarrier_init.release.cluster;\n\tbarrier.cluster.arrive.relaxed.aligned;\n" \
            "\tbarrier.cluster.wait.aligned;\n"
    pre = "\tsetp.gt.u32 \t%p9, %r0, 1000;\n"
    guarded = plain.replace("\tfence", "\t@%p9 fence")
    assert lens.same_schedule(pre + _INIT + plain + load + _USE, pre + _INIT + guarded + load + _USE) == ""
    assert lens.same_schedule(_INIT + plain + load + _USE, _INIT + load + plain + _USE).startswith("the same")
    fenced = "$L__BB0_1:\n\tst.global.u32 \t[%rd1], %r2;\n\tfence.acq_rel.cluster;\n"
    assert lens.same_schedule(_INIT + _SYNC + fenced + plain + load + _USE,
                              _INIT + _SYNC + fenced + load + plain + _USE) == ""
    a = ".visible .entry a()\n{\n" + _INIT + _SYNC + "\tret;\n}\n"
    b = ".visible .entry b()\n{\n\tst.global.u32 \t[%rd1], %r2;\n\tfence.acq_rel.cluster;\n" + _INIT + "{X}" + _USE \
        + "\tret;\n}\n"
    assert lens.same_schedule(a + b.replace("{X}", plain + load), a + b.replace("{X}", load + plain)) == ""
    pair = "\tbarrier.cluster.arrive.relaxed.aligned;\n\tbarrier.cluster.wait.aligned;\n"
    loop = ".visible .entry k()\n{\n.reg .b32 %r<30>;\n$L__BB0_1:\n{PAIR}\tmov.u32 \t%r5, %tid.x;\n" \
           "\tmov.u32 \t%r6, %clock;\n\tsetp.lt.u32 \t%p5, %r6, %r5;\n\t@%p5 bra \t$L__BB0_1;\n" + _INIT + _SYNC \
           + _USE + "\tret;\n}\n"
    assert lens.same_schedule(loop.replace("{PAIR}", ""), loop.replace("{PAIR}", pair)) == ""
    body = [".visible .entry k()", "{", ".reg .pred p;", "\tsetp.ne.b32 \tp, %r1, 0;", "\t@p st.shared.b32 \t[%r2], %r3;",
            "\tsetp.ne.b32 \tp, %r4, 0;", "\t@p st.shared.b32 \t[%r5], %r6;", "\tret;", "}"]
    swapped = body[:3] + [body[5], body[4], body[3]] + body[6:]
    assert lens.same_schedule("\n".join(body), "\n".join(swapped)) == ""
    head = ".visible .entry k(\n.param .u64 k_param_0\n) {\n.reg .b32 %r<10>;\n.reg .b64 %rd<3>;\n" \
           "ld.param.u64 %rd1, [k_param_0];\n"
    scoped = "mov.u32 %r{0}, 1;\n{{\n.reg .b32 %r<5>;\nmov.u32 %r{0}, 5;\n}}\nst.global.u32 [%rd1], %r{0};\nret;\n}}\n"
    assert lens.same_schedule(head + scoped.format(7), head + scoped.format(1)) == ""   # stores 5, stores 1
    c = "\tst.shared.b32 \t[%r1], %r2;\n/* // */ {X}\n\tld.shared.b32 \t%r5, [%r3];\n"
    assert lens.same_schedule(c.replace("{X}", "bar.sync 0;"), c.replace("{X}", "")) == ""
    free = "\tst.shared.b32 \t[%r2], %r{0};\n\tst.shared.b32 \t[%r3], %r{1};\n"       # %r1, %r4: inputs, no writer
    assert lens.same_schedule(free.format(1, 4), free.format(4, 1)) == ""
    assert lens.same_schedule(_written_first(free.format(1, 4)), _written_first(free.format(4, 1))) == ""
