"""Measured warp timelines (multicta_kernels.measure.traces): the parser against traces in the exact format
proton's Chrome-trace writer produces, the figures, and the lens proof that scopes cost nothing
when they are off. GPU tests (marked `clusters`) record real traces."""
import json
import re

import pytest
from triton.experimental import gluon
from triton.experimental.gluon import language as gl

from multicta_kernels import lens, results
from multicta_kernels.measure import trace_demos, traces as tl
from multicta_kernels.show import figures

# ------------------------------------------------------------------ proton's writer, in Python

KERNEL = "center_rows_kernel"


def _lines(intervals):
    """Proton's assignLineIds: by start, each interval on the first line where it overlaps nothing."""
    order = sorted(range(len(intervals)), key=lambda i: intervals[i][0])
    lines, out = [], [0] * len(intervals)
    for i in order:
        s, e = intervals[i]
        for n, taken in enumerate(lines):
            if all(not (s < te and e > ts) for ts, te in taken):
                break
        else:
            n = len(lines)
            lines.append([])
        lines[n].append((s, e))
        out[i] = n
    return out


def chrome_trace(blocks, kernel=KERNEL, stack=("measured",)):
    """What StreamChromeTraceWriter (triton 3.9's libproton) writes for these CTAs.

    Each block: cta, sm, init/pre/post (ns, %globaltimer), ``warps`` {warp: [(scope, start, end)]} in
    cycles, ``events`` [(name, (warp, cycle), (warp, cycle))] for pl.start_event / pl.end_event."""
    out, flow_id = [], 1
    min_init = min(b["init"] for b in blocks)
    for b in sorted(blocks, key=lambda b: (b["sm"], b["cta"])):
        evs = b.get("events", [])
        min_cycle = min([s for recs in b["warps"].values() for _, s, _ in recs] +
                        [c for _, (_, c0), (_, c1) in evs for c in (c0, c1)])
        adjust = (b["init"] - min_init) - min_cycle
        pid = f"{kernel} Core{b['sm']} CTA{b['cta']}"
        call_stack = [*stack, kernel]
        line = {}
        for w in b["warps"]:
            mine = [(s, e, ("scope", i)) for i, (_, s, e) in enumerate(b["warps"][w])]
            mine += [(a[1], z[1], ("event", i)) for i, (_, a, z) in enumerate(evs) if a[0] == z[0] == w]
            for (s, e, tag), n in zip(mine, _lines([(s, e) for s, e, _ in mine])):
                line[(w, tag)] = n
        for w, recs in b["warps"].items():
            for i, (name, s, e) in enumerate(recs):
                out.append({"cname": "thread_state_running", "name": name, "cat": kernel, "ph": "X", "pid": pid,
                            "tid": f"warp {w} (line {line[(w, ('scope', i))]})", "ts": (s + adjust) / 1000.0,
                            "dur": (e - s) / 1000.0,
                            "args": {"Init Time (ns)": b["init"], "Post Final Time (ns)": b["post"],
                                     "Finalization Time (ns)": b["post"] - b["pre"], "Frequency (MHz)": 1000.0,
                                     "call_stack": call_stack}})
        for i, (name, (w0, c0), (w1, c1)) in enumerate(evs):
            if w0 == w1:
                out.append({"cname": "good", "name": name, "cat": "async", "ph": "X", "pid": pid,
                            "tid": f"warp {w0} (line {line[(w0, ('event', i))]})", "ts": (c0 + adjust) / 1000.0,
                            "dur": (c1 - c0) / 1000.0, "args": {"call_stack": call_stack}})
                continue
            for w, c, side in ((w0, c0, "flow_out"), (w1, c1, "flow_in")):
                out.append({"cname": "good", "name": name, "cat": "flow", "ph": "X", "dur": 0, "bind_id": flow_id,
                            side: True, "pid": pid, "tid": f"warp {w} (line 0)", "ts": (c + adjust) / 1000.0,
                            "args": {"call_stack": call_stack}})
            flow_id += 1
    return {"displayTimeUnit": "ns", "traceEvents": out}


def cluster_blocks(clusters=2, num_ctas=2, warps=2, base=1_700_000_000_000_000_000):
    """clusters x num_ctas CTAs; CTA c starts 400 ns after CTA c-1; its own cycle counter starts
    anywhere. Every warp: load 1000 cycles, cross_cta_sum 600 * (warp + 1), store 200."""
    blocks = []
    for cta in range(clusters * num_ctas):
        c0 = 10_000_000 * (cta + 3)
        recs = {}
        for w in range(warps):
            t = c0 + 10 * w
            recs[w] = [("load", t, t + 1000), ("cross_cta_sum", t + 1000, t + 1000 + 600 * (w + 1)),
                       ("store", t + 1000 + 600 * (w + 1), t + 1200 + 600 * (w + 1))]
        blocks.append({"cta": cta, "sm": 2 * cta + 1, "init": base + 400 * cta, "pre": base + 400 * cta + 2000,
                       "post": base + 400 * cta + 2100, "warps": recs})
    return blocks


def write(tmp_path, doc, name="t.chrome_trace"):
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return p


# ------------------------------------------------------------------------------ the parser

def test_load_places_ctas_by_globaltimer_and_converts_cycles(tmp_path):
    path = write(tmp_path, chrome_trace(cluster_blocks()))
    tr = tl.load(path, num_ctas=2, clock_mhz=2000)
    assert len(tr) == 4 * 2 * 3 and tr.meta["kernel"] == KERNEL
    recs = tr.records()
    assert {(r["cluster"], r["rank"], r["cta"], r["sm"]) for r in recs} == {
        (c // 2, c % 2, c, 2 * c + 1) for c in range(4)}
    by = {(r["cta"], r["warp"], r["scope"]): r for r in recs}
    # CTA 3 starts 1200 ns after CTA 0; its warp 1 starts 10 cycles = 5 ns after its warp 0
    assert by[(3, 1, "load")]["start_ns"] == pytest.approx(1200 + 5)
    assert by[(3, 1, "load")]["end_ns"] - by[(3, 1, "load")]["start_ns"] == pytest.approx(500)
    assert by[(0, 1, "cross_cta_sum")]["end_ns"] - by[(0, 1, "cross_cta_sum")]["start_ns"] == pytest.approx(600)
    assert min(r["start_ns"] for r in recs) == 0
    assert all(r["kind"] == "scope" and r["partition"] == "default" and r["line"] == 0 for r in recs)


def test_load_without_a_clock_keeps_protons_units(tmp_path):
    tr = tl.load(write(tmp_path, chrome_trace(cluster_blocks(clusters=1, num_ctas=1))))
    (load,) = [r for r in tr.records() if r["scope"] == "load" and r["warp"] == 0]
    assert load["end_ns"] - load["start_ns"] == 1000          # cycles, as proton counts them
    assert tr.meta["clock_mhz"] is None and "cycles" in tr.meta["time"]


def test_clock_estimate_from_globaltimer(tmp_path):
    # 2000 ns between init and pre-final; records span 1000 + 1200 + 200 + 10 = 2410 cycles: 1205 MHz
    tr = tl.load(write(tmp_path, chrome_trace(cluster_blocks(clusters=1, num_ctas=1))))
    assert tr.meta["clock_estimate_mhz"] == pytest.approx(1205.0)


def test_load_picks_one_launch_by_host_scope(tmp_path):
    warm = chrome_trace(cluster_blocks(clusters=1, num_ctas=1), stack=("warmup",))
    measured = chrome_trace(cluster_blocks(clusters=1, num_ctas=1, base=1_700_000_000_000_100_000))
    doc = {"displayTimeUnit": "ns", "traceEvents": warm["traceEvents"] + measured["traceEvents"] + [
        {"ph": "M", "pid": 0, "tid": 0, "name": "process_name", "args": {"name": "Trace"}}]}
    path = write(tmp_path, doc)
    with pytest.raises(ValueError, match="launch"):
        tl.load(path)
    tr = tl.load(path, launch="measured")
    assert len(tr) == 2 * 3 and tr.meta["launch"] == "measured" and min(tr.column("start_ns")) == 0


def test_load_names_kernels_and_rejects_empty(tmp_path):
    a = chrome_trace(cluster_blocks(clusters=1, num_ctas=1), kernel="a_kernel")
    b = chrome_trace(cluster_blocks(clusters=1, num_ctas=1), kernel="b_kernel")
    path = write(tmp_path, {"traceEvents": a["traceEvents"] + b["traceEvents"]})
    with pytest.raises(ValueError, match="several kernels"):
        tl.load(path)
    assert tl.load(path, kernel="b_kernel").meta["kernel"] == "b_kernel"
    with pytest.raises(ValueError, match="no instrumented events"):
        tl.load(path, launch="nowhere")


def handoff_blocks():
    """A warp-specialised CTA: warps 0-3 reduce, warps 4-7 load; one event crosses from warp 4 to
    warp 0 (a TMA load issued, then seen landed), one stays on warp 1."""
    recs = {w: [("wait", 100, 400), ("add", 400, 450)] for w in range(4)}
    recs.update({w: [("issue", 50, 80)] for w in range(4, 8)})
    return [{"cta": 0, "sm": 7, "init": 5_000, "pre": 5_600, "post": 5_700, "warps": recs,
             "events": [("tma_in_flight", (4, 60), (0, 390)), ("tma_in_flight", (1, 120), (1, 380))]}]


def test_events_and_partitions(tmp_path):
    owner = tl.partition_map(4, [4], ["reducer", "loader"])
    tr = tl.load(write(tmp_path, chrome_trace(handoff_blocks(), kernel="tma_handoff_kernel")), partitions=owner)
    events = [r for r in tr.records() if r["kind"] == "event"]
    crossing = [r for r in events if r["warp"] != r["end_warp"]]
    (same,) = [r for r in events if r["warp"] == r["end_warp"]]
    assert len(crossing) == 1 and crossing[0]["warp"] == 4 and crossing[0]["end_warp"] == 0
    assert crossing[0]["partition"] == "loader" and crossing[0]["end_ns"] - crossing[0]["start_ns"] == 330
    assert same["warp"] == 1 and same["end_ns"] - same["start_ns"] == 260 and same["line"] == 1
    assert {r["partition"] for r in tr.records() if r["scope"] == "issue"} == {"loader"}
    assert tr.meta["partitions"]["5"] == "loader"


def test_partition_map():
    assert tl.partition_map(4) == {0: "default", 1: "default", 2: "default", 3: "default"}
    m = tl.partition_map(4, [1, 2], ["epilogue", "load", "mma"])
    assert [m[w] for w in range(7)] == ["epilogue"] * 4 + ["load", "mma", "mma"]
    with pytest.raises(ValueError, match="names"):
        tl.partition_map(4, [1], ["only_one"])


def test_trim(tmp_path):
    tr = tl.load(write(tmp_path, chrome_trace(cluster_blocks())), num_ctas=2, clock_mhz=1000)
    one = tl.trim(tr, clusters=1)
    assert {r["cluster"] for r in one.records()} == {0} and len(one) == 12
    assert one.meta["trimmed"]["rows_before"] == 24
    assert {r["rank"] for r in tl.trim(tr, ctas=[1]).records()} == {1}
    assert {r["warp"] for r in tl.trim(tr, warps=[0]).records()} == {0}
    assert {r["scope"] for r in tl.trim(tr, scopes=["store"]).records()} == {"store"}
    early = tl.trim(tr, window_ns=(0, 500))                    # CTA 0 and 1 only; CTA 2 starts at 800
    assert {r["cta"] for r in early.records()} == {0, 1}
    assert min(early.column("start_ns")) == 0 and max(early.column("end_ns")) > 500   # kept whole, not shifted


def test_summary_medians(tmp_path):
    tr = tl.load(write(tmp_path, chrome_trace(cluster_blocks())), num_ctas=2, clock_mhz=1000)
    rows = {(r["partition"], r["scope"]): r for r in tl.summary(tr)}
    assert rows[("default", "load")]["median_ns"] == 1000 and rows[("default", "load")]["count"] == 8
    assert rows[("default", "cross_cta_sum")]["median_ns"] == 900      # 600 and 1200, four each
    assert rows[("default", "cross_cta_sum")]["min_ns"] == 600 and rows[("default", "cross_cta_sum")]["max_ns"] == 1200
    backwards = tl.Trace(list(reversed(tr.rows)), tr.meta, tr.columns)      # rank 1's intervals come first
    ranked = tl.summary(backwards, by=("rank",))
    assert [r["rank"] for r in ranked] == sorted(r["rank"] for r in ranked) and {r["rank"] for r in ranked} == {0, 1}
    assert sum(r["count"] for r in ranked if r["scope"] == "load") == 8          # the same intervals, split by rank


def test_overhead():
    o = tl.overhead(6.0, 5.0)
    assert o["added"] == pytest.approx(1.0) and o["ratio"] == pytest.approx(1.2)
    with pytest.raises(ValueError):
        tl.overhead(1.0, 0.0)


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def test_gantt_draws_a_bar_per_interval(tmp_path):
    plt = _pyplot()
    tr = tl.load(write(tmp_path, chrome_trace(cluster_blocks())), num_ctas=2, clock_mhz=2000)
    ax = figures.gantt(tl.trim(tr, clusters=1))
    assert len(ax.patches) == 12                                   # 2 CTAs x 2 warps x 3 scopes
    assert len(ax.get_yticks()) == 4                               # one row per warp of each CTA
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["load", "cross_cta_sum", "store"]
    assert ax.get_xlabel().endswith("(ns)")
    colours = {p.get_facecolor()[:3] for p in ax.patches}
    assert len(colours) == 3
    plt.close("all")


def test_gantt_events_and_partitions(tmp_path):
    plt = _pyplot()
    owner = tl.partition_map(4, [4], ["reducer", "loader"])
    tr = tl.load(write(tmp_path, chrome_trace(handoff_blocks(), kernel="tma_handoff_kernel")), partitions=owner)
    ax = figures.gantt(tr)
    assert len(ax.patches) == 4 * 2 + 4 + 1                        # scopes, plus the same-warp event
    assert len(ax.texts) == 1                                      # the crossing event: an arrow
    assert any("(loader)" in t.get_text() for t in ax.get_yticklabels())
    ax = figures.gantt(tr, by="partition")
    assert [t.get_text() for t in ax.get_yticklabels()] == ["cluster 0 CTA 0 reducer", "cluster 0 CTA 0 loader"]
    with pytest.raises(ValueError):
        figures.gantt(tr, by="lane")
    plt.close("all")


ENV = {"gpu": "NVIDIA H200", "capability": [9, 0], "driver": "test", "triton": "3.9.0", "torch": "test",
       "date": "2025-01-01"}


def test_save_and_load_a_result(tmp_path):
    tr = tl.load(write(tmp_path, chrome_trace(cluster_blocks())), num_ctas=2, clock_mhz=2000)
    path = tl.save(tl.trim(tr, clusters=1), tmp_path / "h200" / "timeline_demo.json", ENV,
                   method={"clock": "test"})
    result = results.load(path)
    assert result["benchmark"] == "timeline" and result["columns"] == list(tl.COLUMNS)
    back = tl.load(path)
    assert back.rows == tl.trim(tr, clusters=1).rows and back.meta["gpu"] == "NVIDIA H200"
    assert back.meta["num_ctas"] == 2 and "clusters" in back.meta["trimmed"]
    with pytest.raises(ValueError, match="trim"):
        tl.save(tr, tmp_path / "big.json", ENV, max_rows=10)


def test_record_needs_a_gpu():
    from multicta_kernels.core.hardware import device, UnsupportedHardwareError
    if device().capability is not None:
        pytest.skip("a GPU is here")
    with pytest.raises(UnsupportedHardwareError, match="traces.record .* needs thread-block clusters"):
        tl.record(lambda: None)


# ------------------------------------------------------------------------ the lens, on a CPU

@gluon.jit
def _scope_free_twin(x_ptr, out_ptr, N, BLOCK: gl.constexpr, layout: gl.constexpr, INSTRUMENT: gl.constexpr):
    # center_rows_kernel with its scopes deleted: what an uninstrumented build must equal
    row = gl.program_id(0).to(gl.int64)
    cols = gl.arange(0, BLOCK, layout)
    mask = cols < N
    x = gl.load(x_ptr + row * N + cols, mask=mask, other=0.0)
    mean = gl.sum(x, axis=0) / N
    gl.store(out_ptr + row * N + cols, x - mean, mask=mask)


def _instructions(ptx):
    """Instruction lines, with the kernel's name dropped from parameter names."""
    return [re.sub(r"\w+_param_", "param_", line.strip()) for _, _, line in lens.instructions(ptx)]


@pytest.mark.parametrize("num_ctas", [1, 2])
def test_scopes_off_compile_to_the_same_instructions(num_ctas):
    from dataclasses import replace
    off = lens.compile(trace_demos.demo_spec(num_ctas, instrument=False), "sm_90a")
    twin = lens.compile(replace(trace_demos.demo_spec(num_ctas), name="twin", fn=_scope_free_twin), "sm_90a")
    assert off.census() == twin.census() and _instructions(off.ptx) == _instructions(twin.ptx)
    assert off.shared_bytes == twin.shared_bytes
    # without a proton session even the flag-on build is byte-identical: pl.enter_scope emits nothing
    assert lens.same_code(lens.compile(trace_demos.demo_spec(num_ctas, instrument=True), "sm_90a").ptx, off.ptx)
    # inside one, the flag-off build is still byte-identical
    assert lens.same_code(tl.instrumented(trace_demos.demo_spec(num_ctas, instrument=False), "sm_90a").ptx, off.ptx)


@pytest.mark.parametrize("num_ctas", [1, 2])
def test_instrumented_build_compiles_on_a_cpu(num_ctas):
    off = lens.compile(trace_demos.demo_spec(num_ctas), "sm_90a")
    on = tl.instrumented(trace_demos.demo_spec(num_ctas, instrument=True), "sm_90a")
    assert on.ttgir.count("proton.record start") == 3 and on.ttgir.count("proton.record end") == 3
    c = on.census(["%clock;", "%clock_hi;", "%globaltimer", "%smid", "%cluster_ctarank"])
    assert c["%clock;"] == 6 and c["%clock_hi;"] == 6               # two cycle reads per scope
    assert c["%globaltimer"] >= 2 and c["%smid"] == 1               # the CTA header: start, SM, end
    assert on.shared_bytes >= off.shared_bytes + 4096                # the record buffer
    assert on.census()["bar.sync"] >= 1                              # the final copy waits for all warps
    if num_ctas > 1:
        assert c["%cluster_ctarank"] >= 1                            # each CTA of a cluster has its buffer


def test_instrumented_build_for_blackwell():
    on = tl.instrumented(trace_demos.demo_spec(2, instrument=True), "sm_100a")
    assert on.census(["%clock;"])["%clock;"] == 6


def test_scopes_and_events_inside_warp_specialize():
    off = lens.compile(trace_demos.handoff_spec(False), "sm_90a")
    on = tl.instrumented(trace_demos.handoff_spec(True), "sm_90a")
    assert off.census(["cp.async.bulk.tensor"])["cp.async.bulk.tensor"] >= 1
    assert on.ttgir.count("proton.record start") == 4 * 3            # issue, wait, add for each of 4 tiles
    assert "proton.event start" in on.ttgir and "proton.event end" in on.ttgir
    assert on.census(["%clock;"])["%clock;"] == 4 * (2 + 2 + 2) + 8   # 4 tiles x 3 scopes x 2, + 8 event stamps
    # an event cannot be compiled without proton's instrumentation: allocate it only if INSTRUMENT
    with pytest.raises(lens.LensCompileError):
        lens.compile(trace_demos.handoff_spec(True), "sm_90a")


def test_proton_compiler_restores_state():
    import triton
    from triton.profiler.flags import flags
    with tl.proton_compiler(max_shared=1024) as mode:
        assert flags.instrumentation_on and triton.knobs.compilation.instrumentation_mode == mode
    assert not flags.instrumentation_on and triton.knobs.compilation.instrumentation_mode == ""


# ------------------------------------------------------------------------------- on a GPU

@pytest.mark.clusters
@pytest.mark.parametrize("num_ctas", [1, 2])
def test_record_center_rows(num_ctas, tmp_path):
    import torch
    x = torch.randn(64, 1024, device="cuda")
    out = torch.empty_like(x)
    tr = tl.record(lambda: trace_demos.center_rows(x, out, num_ctas=num_ctas, instrument=True), folder=tmp_path,
                   num_ctas=num_ctas)
    torch.testing.assert_close(out, x - x.mean(1, keepdim=True), atol=1e-5, rtol=1e-5)
    assert len(tr) == 64 * num_ctas * 4 * 3
    assert {r["rank"] for r in tr.records()} == set(range(num_ctas))
    assert all(r["end_ns"] >= r["start_ns"] for r in tr.records())


def test_clc_matmul_records_with_a_buffer_that_fits_a_blackwell_cta():
    """proton's default record buffer does not fit beside the CLC matmul's ring (Triton would refuse the
    launch); the doctor records with clc_matmul.TIMELINE_BUFFER, which does."""
    from multicta_kernels import clc_matmul as cm
    spec = cm.clc_matmul_spec(instrument=True)
    limit = tl.MAX_SHARED["sm_100a"]
    with pytest.raises(lens.LensCompileError, match=r"needs \d+ KiB of shared memory per CTA, more than the 227 KiB"):
        tl.instrumented(spec, "sm_100a")              # the lens refuses what the driver would not launch
    assert tl.instrumented(spec, "sm_100a", fits=False).shared_bytes > limit
    assert tl.instrumented(spec, "sm_100a", mode=tl.default_mode(cm.TIMELINE_BUFFER)).shared_bytes <= limit


def test_demo_arguments_are_checked_before_the_hardware():
    import torch
    x = torch.zeros(4, 100)
    with pytest.raises(ValueError, match="num_ctas must be a power of two"):
        trace_demos.center_rows_args(x, num_ctas=3)
    with pytest.raises(ValueError, match="num_ctas must be a power of two"):
        trace_demos.demo_spec(3)
    with pytest.raises(ValueError, match=r"out must be a contiguous torch.float32 tensor of shape \(4, 100\)"):
        trace_demos.center_rows_args(x, torch.zeros(3))
    h = trace_demos.HANDOFF
    xh = torch.zeros(h["tiles"] * h["rows"] * 2, h["cols"], dtype=torch.float16)
    with pytest.raises(ValueError, match=r"out must be .* shape \(2,\)"):
        trace_demos.tma_handoff_args(xh, torch.zeros(5))


def test_partitions_are_placed_as_the_compiler_places_them():
    """Triton's allocate-warp-groups pass puts larger partitions first and pads to whole warp groups:
    chapter 6's one-warp producer, behind eight consumer warps, is warp 10, not warp 8."""
    from multicta_kernels import clc_matmul as cm
    from multicta_kernels import hopper_matmul as hm
    hopper = tl.placed_partitions(hm.hopper_matmul_spec(), ["consumer", "producer"])
    assert hopper == {**{w: "consumer" for w in range(8)}, 10: "producer"}
    assert tl.placed_partitions(cm.clc_matmul_spec(), ["epilogue", "loader", "mma", "scheduler"], "sm_100a") == \
        tl.partition_map(4, [1, 1, 1], ["epilogue", "loader", "mma", "scheduler"])
    with pytest.raises(ValueError, match="a default partition and 1 workers; got names"):
        tl.placed_partitions(hm.hopper_matmul_spec(), ["consumer", "producer", "extra"])


@pytest.mark.parametrize("name, spec, names", [
    ("timeline_hopper_matmul_k512", lambda hm: hm.hopper_matmul_spec(), ["consumer", "producer"]),
    ("timeline_hopper_matmul_k4096", lambda hm: hm.hopper_matmul_spec(), ["consumer", "producer"]),
    ("timeline_hopper_matmul_pingpong_k512",
     lambda hm: hm.hopper_matmul_spec(**hm.VARIANTS["ping-pong"]), ["producer", "consumer0", "consumer1"]),
    ("timeline_tma_handoff", lambda hm: trace_demos.handoff_spec(False), list(trace_demos.HANDOFF["names"])),
])
def test_recorded_partitions_match_the_compilers_placement(name, spec, names):
    from multicta_kernels import hopper_matmul as hm
    tr = tl.load(f"{results.RESULTS}/h200/{name}.json")
    owner = tl.placed_partitions(spec(hm), names)
    assert {int(k): v for k, v in tr.meta["partitions"].items()} == owner
    assert {(r["warp"], r["partition"]) for r in tr.records()} <= set(owner.items())
