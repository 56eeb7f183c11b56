"""What the book may say about where its kernels ran, generated from ``results/*/doctor.json``, never typed.

:func:`label` is the line a chapter's banner prints; :func:`status_table` the table README.md and
book/workshop.md carry between generated markers (``tools/update_docs.py`` writes it there); :func:`recorded`
a check's row of a GPU's recorded doctor run, which chapters quote on machines that cannot run the kernel.
"""
from __future__ import annotations

from pathlib import Path

from . import store
from ..core import hardware
from ..core.hardware import CLUSTERS, CUDA, TCGEN05, WGMMA
from .store import RESULTS


CHAPTERS = {
    "0": "Triton foundations",
    "1": "CGA layouts and the multi-CTA softmax",
    "2": "multi-CTA mbarriers",
    "3": "TMA multicast",
    "4": "2-CTA tcgen05 MMA",
    "5": "the CLC matmul",
    "6": "the Hopper cluster matmul",
}


# What each chapter's live cells need (a chapter may have cells of several kinds).
CHAPTER_FEATURES = {"0": (CUDA, CLUSTERS), "1": (CLUSTERS,), "2": (CLUSTERS,), "3": (CLUSTERS, WGMMA, TCGEN05),
                    "4": (TCGEN05,), "5": (TCGEN05,), "6": (WGMMA,)}


# ------------------------------------------------------------------------------ recorded labels

def gpu_folder(name: str) -> str:
    """results/ folder name of a GPU: "NVIDIA H200" -> "h200"."""
    return name.replace("NVIDIA", "").strip().lower().replace(" ", "-") or "gpu"


def ran_on(feature: hardware.Feature, results: Path = RESULTS) -> list[tuple[str, str]]:
    """(GPU, date) of every recorded doctor run in which every check needing ``feature`` passed."""
    out = []
    for path in sorted(results.glob("*/doctor.json")):
        rec = store.load(path)
        mine = [r for r in store.records(rec) if r["feature"] == feature.name]
        if mine and all(r["status"] == "PASS" for r in mine):
            out.append((rec["gpu"], rec["date"]))
    return out


def recorded(check: str, gpu: str = "h200", results: Path = RESULTS) -> dict:
    """The row of ``check`` in a GPU's recorded doctor run (``results/<gpu>/doctor.json``): what the chapters
    quote on a machine that cannot run the kernel itself."""
    rows = {r["check"]: r for r in store.records(store.load(results / gpu / "doctor.json"))}
    if check not in rows:
        raise KeyError(f"no check {check!r} in results/{gpu}/doctor.json; recorded: {', '.join(rows)}")
    return rows[check]


def label(feature: hardware.Feature, results: Path = RESULTS) -> str:
    """What the book may say about the kernels that need ``feature``: generated from results/."""
    runs = ran_on(feature, results)
    if runs:
        return "ran on " + "; ".join(f"{gpu}, {date}" for gpu, date in runs)
    arch = {TCGEN05: "sm_100a", WGMMA: "sm_90a"}.get(feature, "sm_90a")
    gpu = {TCGEN05: "a Blackwell GPU", WGMMA: "a Hopper GPU"}.get(feature, "a GPU")
    return f"compiled for {arch} and audited; not yet run on {gpu}"


def status_table(results: Path = RESULTS) -> str:
    """The markdown table the README and the workshop guide carry (between generated markers): for
    each chapter and each feature it needs, whether its kernels have run, and where."""
    feats = hardware.FEATURES
    lines = ["| chapter | " + " | ".join(f"`{f.name}`" for f in feats) + " |", "| --- |" + " --- |" * len(feats)]
    for ch, title in CHAPTERS.items():
        cells = [label(f, results) if f in CHAPTER_FEATURES[ch] else "" for f in feats]
        lines.append(f"| {ch}. {title} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


MARK_BEGIN, MARK_END = "<!-- generated: hardware-status -->", "<!-- /generated -->"


def render_docs(text: str, results: Path = RESULTS) -> str:
    """``text`` with the block between the generated markers replaced by :func:`status_table`."""
    if MARK_BEGIN not in text or MARK_END not in text:
        return text
    head, rest = text.split(MARK_BEGIN, 1)
    _, tail = rest.split(MARK_END, 1)
    note = "<!-- written by `python tools/update_docs.py` from results/*/doctor.json -->"
    return f"{head}{MARK_BEGIN}\n{note}\n\n{status_table(results)}\n\n{MARK_END}{tail}"
