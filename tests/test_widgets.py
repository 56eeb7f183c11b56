"""The explorers of multicta_kernels.show.widgets, driven without a browser: change a value, check what is drawn."""
import matplotlib.pyplot as plt
import pytest

from multicta_kernels import barriers
from multicta_kernels.show import widgets as w
from multicta_kernels.core import layouts

ipywidgets = pytest.importorskip("ipywidgets")


@pytest.fixture(autouse=True)
def no_open_figures():
    plt.close("all")           # other tests may leave figures open; ours must leave none
    yield


# ------------------------------------------------------------------------------- pure functions

@pytest.mark.parametrize("bases, ctas", [("[[0, 1], [1, 0]]", [0, 1, 2, 3]), ("[[1, 0]]", [0, 1]),
                                         ("[[0, 0]]", [0]), ("[]", [0]),
                                         ("[[0, 1], [0, 2], [1, 0]]", list(range(8)))])
def test_ownership_colours_the_ctas_triton_names(bases, ctas):
    fig = w.ownership_figure("BlockedLayout", bases, "16, 32")
    assert w.coloured_ctas(fig) == ctas
    n = 1 << len(layouts.parse_bases(bases))
    assert f"{len(ctas)} of {n} CTAs" in fig.axes[0].get_title()
    assert fig._suptitle.get_text() == f"BlockedLayout, cga_layout={layouts.parse_bases(bases)}, shape [16, 32]"
    assert not plt.get_fignums()                     # closed: the inline backend will not show it twice


def test_ownership_matches_the_model_block_by_block():
    import numpy as np

    from multicta_kernels.core import layouts
    fig = w.ownership_figure("BlockedLayout", [[0, 1], [1, 0]], [16, 32])
    drawn = np.asarray(fig.axes[0].images[0].get_array())
    model = layouts.cta_owner([[0, 1], [1, 0]], [16, 32], 4)
    assert np.array_equal(1 << drawn.astype(int), model)


def test_broadcast_is_marked_and_shared_layouts_draw():
    fig = w.ownership_figure("BlockedLayout", "[[0, 0], [1, 0]]", "8, 32")
    assert "held by several" in fig.axes[0].get_title()
    assert any(t.get_text().endswith("*") for t in fig.axes[0].texts)
    fig = w.ownership_figure("NVMMASharedLayout", "[[1, 0], [2, 0], [0, 1]]", "64, 64")
    assert w.coloured_ctas(fig) == list(range(8))
    fig = w.ownership_figure("SwizzledSharedLayout", "[[1, 0]]", "16, 16", by="reg")
    assert fig.axes[0].get_title() == "offset in the CTA's buffer"


@pytest.mark.parametrize("kind, bases, shape, by, msg", [
    ("BlockedLayout", "[[2, 0]]", "16, 32", "cta", "should be 1 along dimension 0"),
    ("BlockedLayout", "[[1, 0]", "16, 32", "cta", "write a list of bases"),
    ("BlockedLayout", "[[1, 0, 0]]", "16, 32", "cta", "each basis has 2 entries"),
    ("BlockedLayout", "[[1, 0]]", "3, 32", "cta", "power of two"),        # Triton would abort the process
    ("BlockedLayout", "[[1, 0]]", "16", "cta", "two integers"),
    ("BlockedLayout", "[[1, 0], [2, 0], [4, 0]]", "4, 32", "cta", "only 4 there"),
    ("BlockedLayout", "[[1, 0]]", "256, 256", "cta", "at most 8192 elements"),
    ("BlockedLayout", "[[1, 0]]", "16, 32", "thread", "owner field"),
    ("NVMMASharedLayout", "[[1, 0]]", "16, 64", "warp", "shared memory"),
    ("NVMMASharedLayout", "[[0, 0]]", "64, 64", "cta", "broadcast shared layouts"),
    ("Nope", "[[1, 0]]", "16, 32", "cta", "layout kind"),
    ("BlockedLayout", "[[1, 0]] * 5", "16, 32", "cta", "write a list"),
    ("BlockedLayout", [[1, 0]] * 5, "16, 32", "cta", "at most 4 bases"),
])
def test_bad_ownership_input_is_a_message(kind, bases, shape, by, msg):
    with pytest.raises(ValueError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        w.ownership_figure(kind, bases, shape, by)
    view = w._guard(w._ownership_view, dict(kind=kind, bases=bases, shape=shape, by=by))
    assert view.error and msg in view.error and "Traceback" not in view.error
    assert not plt.get_fignums()


def test_barrier_steps_show_phase_and_who_waits():
    s = barriers.barrier_steps("[[0]]", barriers.HAND_OFF, step=3)      # init, arrive 0, wait 0 0
    assert s.waiting == [[0, 0, 0, 3]]
    assert s.barriers == [[0, "0, 1", "1 / 2", 0, 0, 0]]
    assert [r[2] for r in s.trace] == ["init", "arrive", "wait"]
    s = barriers.barrier_steps("[[0]]", barriers.HAND_OFF, step=4)      # CTA 1 arrives: phase 0 completes
    assert s.waiting == [] and s.barriers[0][4:] == [1, 1]
    assert s.trace[-1][2] == "complete"
    s = barriers.barrier_steps("[[0]]", barriers.HAND_OFF)
    assert s.step == len(s.ops) == 7 and s.error is None and s.barriers[0][4] == 2
    assert "step 7 of 7" in s.title and "2 CTAs, 1 barrier)" in s.title


def test_lost_phase_is_a_deadlock():
    s = barriers.barrier_steps("[[0]]", barriers.LOST_PHASE)
    assert s.waiting == [[0, 0, 0, 7]]
    assert "CTA 0 is still blocked" in s.error and "deadlock" in s.error
    assert s.step == 7


def test_tma_bytes_complete_the_phase():
    s = barriers.barrier_steps("[[0]]", barriers.TMA_BYTES, step=4)
    assert s.barriers[0][3] == 32768 and s.waiting == [[0, 0, 0, 4]]     # 16 KiB x group of 2 expected
    s = barriers.barrier_steps("[[0]]", barriers.TMA_BYTES)
    assert s.barriers[0][3] == 0 and s.barriers[0][4] == 1 and s.waiting == []


def test_group_barriers_and_too_many_arrivals():
    s = barriers.barrier_steps("[[0], [1]]", "init 1\narrive 1\narrive 2\narrive 3")
    assert [b[0] for b in s.barriers] == [0, 2] and s.barriers[1][4] == 1      # CTAs 2 and 3 completed theirs
    s = barriers.barrier_steps("[[1]]", "init 1\narrive 0\narrive 0")
    assert s.error is None                     # per-CTA barriers: each arrival completes a phase
    assert s.barriers[0][4] == 2
    s = barriers.barrier_steps("[[0]]", "init 2\narrive 0\nexpect 0 64\nexpect 1 64\narrive 1\narrive 1")
    assert s.error and "operation" in s.error


@pytest.mark.parametrize("script, msg", [
    ("arive 0", "'arive' is not an operation"),
    ("init 1\narrive 5", "CTA 5 does not exist"),
    ("arrive 0", "start with `init COUNT`"),
    ("init 1\nwait 0 2", "a parity is 0 or 1"),
    ("init x", "init takes integers"),
    ("init 1\ninit 1", "init once"),
    ("init 1\nexpect 0", "expect takes CTA BYTES"),
])
def test_bad_scripts_are_messages(script, msg):
    with pytest.raises(ValueError, match=msg.replace("(", r"\(")):
        barriers.barrier_steps("[[0]]", script)
    view = w._guard(w._barrier_view, dict(bases="[[0]]", script=script, step=None))
    assert view.error and msg in view.error


def test_barrier_html_names_waiters():
    text = w.barrier_html(barriers.barrier_steps("[[0]]", barriers.HAND_OFF, step=3))
    assert "CTA 0 waits on parity 0" in text and "<table>" in text


def test_receivers_table_and_figure():
    rows = w.receivers_table("[(1, 0), (2, 0)]", two_ctas=True)
    b_rows = [r for r in rows if r[0] == "B"]
    assert [r[2] for r in b_rows] == ["0, 2", "1, 3"] and b_rows[0][3] == "0b0101"
    assert len([r for r in rows if r[0] == "A"]) == 4
    fig = w.receivers_figure([(1, 0), (0, 1)])
    assert fig.axes[0].get_title() == "C bases [[1, 0], [0, 1]]"
    assert sum(t.get_text().startswith("CTA") for t in fig.axes[0].texts) == 4
    with pytest.raises(ValueError, match="two_ctas needs"):
        w.receivers_figure("[(0, 1), (1, 0)]", two_ctas=True)
    with pytest.raises(ValueError, match="at least one basis"):
        w.receivers_table("[]")


# ------------------------------------------------------------------------------------- widgets

def test_ownership_explorer_redraws_on_change():
    ex = w.ownership_explorer(shape="8, 16")
    assert isinstance(ex, ipywidgets.VBox) and ex.view.error is None
    first = bytes(ex.image.value)
    assert first.startswith(b"\x89PNG")
    ex.controls["bases"].value = "[[1, 0]]"
    assert "2 of 2 CTAs" in ex.view.title and bytes(ex.image.value) != first
    assert w.coloured_ctas(ex.view.data) == [0, 1]
    ex.controls["by"].value = "warp"
    assert ex.view.title.endswith("owner: warp")
    ex.controls["bases"].value = "[[3, 0]]"                 # a mistake: a message, the figure hidden
    assert "should be 1 along dimension 0" in ex.message.value
    assert ex.image.layout.display == "none"
    ex.controls["bases"].value = "[[0, 1]]"
    assert ex.message.value == "" and ex.image.layout.display is None


def test_explorers_carry_a_static_copy_for_the_book():
    ex = w.ownership_explorer(shape=[8, 16])
    data = ex._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in data
    assert "image/png" in data and "interactive in Jupyter" in data["text/plain"]
    data = w.barrier_explorer(step=3)._repr_mimebundle_()
    assert "CTA 0 waits on parity 0" in data["text/html"]
    data = w.receivers_explorer("[(1, 0), (0, 1)]")._repr_mimebundle_()
    assert data["text/html"].startswith("<img") and "<table>" in data["text/html"]


def test_barrier_explorer_steps_and_follows_the_script():
    ex = w.barrier_explorer()
    step = ex.controls["step"]
    assert step.value == step.max == 7 and ex.view.data.waiting == []
    step.value = 3
    assert ex.view.data.waiting == [[0, 0, 0, 3]] and "waits on parity 0" in ex.table.value
    back, fwd = ex.extra[0].children
    fwd.click()
    assert step.value == 4 and ex.view.data.waiting == []
    back.click()
    back.click()
    assert step.value == 2
    ex.controls["script"].value = barriers.LOST_PHASE
    assert step.max == 9 and step.value == 9
    assert "deadlock" in ex.table.value          # a broken protocol is part of the state shown
    ex.controls["script"].value = "init 1\nfrobnicate 0"
    assert "not an operation" in ex.message.value and ex.table.value == ""
    ex.controls["bases"].value = "[[0], [1]]"
    ex.controls["script"].value = "init 1\narrive 3"
    assert "lands on leader CTA 2" in ex.table.value


def test_receivers_explorer_toggles_two_ctas():
    ex = w.receivers_explorer("[(1, 0), (2, 0)]")
    assert "(2-CTA)" not in ex.view.title
    ex.controls["two_ctas"].value = True
    assert ex.view.title.endswith("(2-CTA)")
    ex.controls["acc_bases"].value = "[(0, 1), (1, 0)]"
    assert "two_ctas needs" in ex.message.value


def test_static_paths():
    import matplotlib.figure
    assert isinstance(w.ownership_explorer(shape="8, 16", static=True), matplotlib.figure.Figure)
    assert "waiting" in w.barrier_explorer(static=True).data
    assert "<table>" in w.receivers_explorer(static=True).data
    assert "multicta-widget-message" in w.ownership_explorer(bases="[[5, 0]]", static=True).data


def test_without_ipywidgets_the_static_picture_is_returned(monkeypatch):
    import matplotlib.figure
    monkeypatch.setenv("MULTICTA_STATIC", "1")
    assert isinstance(w.ownership_explorer(shape="8, 16"), matplotlib.figure.Figure)
    assert "<table>" in w.barrier_explorer().data
