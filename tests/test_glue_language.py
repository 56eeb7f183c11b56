"""Glued text values are shared by both editions (issue 28): a value with English words in it shows up as English
inside a Chinese sentence. Every glued string of every notebook, as the CPU execution records it, must be
language-neutral: numbers, code names in backticks, units (GB/s, ns, KiB, TFLOP/s, ...) and symbols (×, /, →, –);
the words belong in the prose of each edition. ALLOWED names the few values that must stay a phrase, with why.

The notebook test executes each notebook (the book build's route: myst_nb's glue records each value in the
outputs), so it is marked `book` (slow)."""
import ast
import re
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))

ALLOWED = {
    # checker verdict names: protocols.check's kinds, printed the same way by the checker's own output
    "ws_cluster_status": "the doctor's verdict name (PASS/FAIL), as results/h200/doctor.json records it",
    "one_step_kind": "a checker verdict name (bold in the prose)",
    "ch5_short_kind": "a checker verdict name (bold in the prose)",
    "ch5_tail_kind": "a checker verdict name (bold in the prose)",
    # the benchmark's variant names, which its tables print
    "x_best512": "a benchmark variant's name, as the results tables print it",
    "x_default": "a benchmark variant's name, as the results tables print it",
    # a GPU's name as its driver reports it: a product name, the same in both editions
    "st_gpu": "the GPU's name (torch.cuda.get_device_name)", "skx_gpu": "the GPU's name (torch.cuda.get_device_name)",
    "skd_gpu": "the GPU's name (torch.cuda.get_device_name)",
    "fc_gpu": "the GPU's name (torch.cuda.get_device_name)", "ph_gpu": "the GPU's name (torch.cuda.get_device_name)",
    "ab_gpu": "the GPU's name (torch.cuda.get_device_name)", "wt_gpu": "the GPU's name (torch.cuda.get_device_name)",
    "wr_gpu": "the GPU's name (torch.cuda.get_device_name)", "wb_gpu": "the GPU's name (torch.cuda.get_device_name)",
    "wa_gpu": "the GPU's name (torch.cuda.get_device_name)", "wg_gpu": "the GPU's name (torch.cuda.get_device_name)",
    "tt_gpu": "the GPU's name (torch.cuda.get_device_name)",
    # code: a kernel's symbol name and a call
    "cublas_kernel": "cuBLAS's kernel symbol", "ncu_blas_kernel": "cuBLAS's kernel symbol",
    "ch5_ref_timer": "a Python call (do_bench's arguments)",
    # results.label(): the status line the banners and figure captions also print
    "ch5_tl_label": "results.label(), the status label the figures print (open: not yet per edition)",
    "h_blackwell_label": "results.label(), the status label the figures print (open: not yet per edition)",
    "ch5_tl_smem": "open: a sentence of five numbers, to be split like the others",
}
# units (and dtype prefixes: fp32, bf16); counted nouns (CTAs, warps) are words: the prose says them
UNITS = {"GB", "TB", "MB", "KB", "KiB", "MiB", "GiB", "ns", "us", "µs", "ms", "TFLOP", "fp", "bf"}
WORD = re.compile(r"[A-Za-z][A-Za-z'\-]+")      # two letters or more: one-letter symbols (S, a, B, L, x) pass


def english_words(value: str) -> list[str]:
    """The English words of a glued string, outside code spans, units and symbols."""
    text = re.sub(r"`[^`]*`", " ", value)
    text = re.sub(r"\d[\d.]*e[-+]?\d+", " ", text)                  # 4.6e-08
    return [w for w in WORD.findall(text) if w not in UNITS]


def test_english_words():
    assert english_words("2 CTAs x 8 warps") == ["CTAs", "warps"]
    assert english_words("1.04 to 1.09") == ["to"] and english_words("132, 66 and 30") == ["and"]
    for neutral in ("1.04–1.09", "2, 16", "8 × 4", "91.1 % → 96.6 %", "33 → 20 MB", "119 → 116 µs", "+8 / +13",
                    "256 × 65536", "S3 a B L S a B", "4.6e-08", "`clc_empty`", "1.2 TFLOP/s", "512 KiB"):
        assert english_words(neutral) == [], neutral


def glued_strings(nb) -> dict[str, str]:
    """name -> value of every glued str in an executed notebook (myst_nb's scrapbook outputs)."""
    found = {}
    for cell in nb.cells:
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            name = out.get("metadata", {}).get("scrapbook", {}).get("name")
            plain = next((v for k, v in out.get("data", {}).items() if k.endswith("text/plain")), None)
            if name and plain:
                try:
                    value = ast.literal_eval(plain)
                except (ValueError, SyntaxError):
                    continue                           # a display object (HTML, a figure), not text
                if isinstance(value, str):
                    found[name] = value
    return found


def english_glues(nb) -> dict[str, list[str]]:
    return {n: w for n, v in glued_strings(nb).items() if n not in ALLOWED and (w := english_words(v))}


@pytest.mark.book
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_glued_text_is_language_neutral(path, tmp_path):
    pytest.importorskip("myst_nb")
    from nbclient import NotebookClient
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    assert glued_strings(nb), "no glued text found: the extraction is broken"
    assert english_glues(nb) == {}, "glued values with English words: move the words into the prose of both editions"
