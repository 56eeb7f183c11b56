"""Interactive explorers for chapters 1 to 3: change a layout, a barrier script or an accumulator
layout and see what Triton (or the package's model) says.

One call in a notebook cell, as its last line::

    from multicta_kernels import widgets
    widgets.ownership_explorer("BlockedLayout", [[0, 1], [1, 0]], [16, 32])
    widgets.barrier_explorer([[0]], barriers.HAND_OFF)            # BarrierSim, step by step
    widgets.receivers_explorer([(1, 0), (2, 0)], two_ctas=True)  # who receives which tile

In Jupyter (Lab, Notebook 7, VS Code, Colab) that shows live controls. Everywhere else a static
picture of the same starting values is shown instead: the returned widget also carries a PNG or an
HTML table in its display data, which the rendered book shows (``_config.yml`` drops the widget
view for the HTML build) and a terminal ignores. ``static=True`` returns the picture itself (a
matplotlib figure or an HTML table), and so does a machine without ``ipywidgets``.

Each explorer is a thin shell around a pure function that takes the control values and returns a
figure or a table: :func:`ownership_figure`, :func:`multicta_kernels.barrier_model.barrier_steps` (with :func:`barrier_html`) and
:func:`receivers_figure` (with :func:`receivers_table`). Tests drive those, and drive the widgets
by setting a control's ``value`` and reading :attr:`Explorer.view`. Bad input (a basis that is not
a power of two, a script line that is not an operation) shows a one-line message, never a
traceback; anything Triton would abort the process on is refused in Python first.
"""
from __future__ import annotations

import ast
import base64
import functools
import html
import io
import os
from dataclasses import dataclass

from . import figures
from ..barrier_model import HAND_OFF, OPS_HELP, BarrierState, barrier_steps, parse_script
from ..core import layouts
from ..core.layouts import parse_bases

# ------------------------------------------------------------------------------------ parsing


def parse_shape(value, max_elements: int = 8192) -> list:
    """``"16, 32"`` -> [16, 32]: two powers of two, at most ``max_elements`` in all."""
    if isinstance(value, str):
        try:
            value = ast.literal_eval(value.strip().strip("[]()") + ",")
        except (ValueError, SyntaxError):
            raise ValueError(f"shape: two integers such as 16, 32, got {value!r}") from None
    shape = list(value)
    if len(shape) != 2 or not all(isinstance(s, int) and not isinstance(s, bool) for s in shape):
        raise ValueError(f"shape: two integers (rows, columns), got {value!r}")
    try:
        layouts.check_shape(shape, 2)
    except ValueError as exc:
        raise ValueError(f"shape: {exc}") from None
    if shape[0] * shape[1] > max_elements:
        raise ValueError(f"shape: at most {max_elements} elements, so the map stays readable, got {shape}")
    return shape


def _finish(fig):
    """Close ``fig`` in pyplot (so Jupyter's inline backend does not show it a second time) and return it."""
    import matplotlib.pyplot as plt
    plt.close(fig)
    return fig


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100, bbox_inches="tight")
    return buf.getvalue()


def _message_html(text: str) -> str:
    return (f'<div class="multicta-widget-message" style="color:#a0361a;font-family:monospace">'
            f"{html.escape(text)}</div>")


def _table_html(rows, header) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


# --------------------------------------------------------------------------- (a) ownership maps

FIELDS = ("cta", "warp", "lane", "reg")


def _blocked(bases, shape):
    from triton.experimental.gluon import language as gl
    return gl.BlockedLayout([1, 4], [4, 8], [2, 2], [1, 0], cga_layout=bases)


def _nvmma(bases, shape):
    from triton.experimental.gluon import language as gl
    return gl.NVMMASharedLayout.get_default_for(shape, gl.float16, cga_layout=bases)


def _swizzled(bases, shape):
    from triton.experimental.gluon import language as gl
    return gl.SwizzledSharedLayout(1, 1, 1, [1, 0], cga_layout=bases)


# name -> (factory(bases, shape), is shared memory, what it is)
LAYOUT_KINDS = {
    "BlockedLayout": (_blocked, False, "BlockedLayout([1, 4], [4, 8], [2, 2], [1, 0]): 4 warps, registers"),
    "NVMMASharedLayout": (_nvmma, True, "NVMMASharedLayout.get_default_for(shape, fp16): TMA/MMA shared memory"),
    "SwizzledSharedLayout": (_swizzled, True, "SwizzledSharedLayout(1, 1, 1, [1, 0]): plain shared memory"),
}


def make_layout(kind: str, bases, shape):
    """Check the inputs in Python (Triton aborts the process on some bad layouts), then build the layout."""
    from ..core.layouts import check_cga_layout, cta_split
    if kind not in LAYOUT_KINDS:
        raise ValueError(f"layout kind: one of {', '.join(LAYOUT_KINDS)}, got {kind!r}")
    bases = parse_bases(bases, "cga_layout", width=2)
    shape = parse_shape(shape)
    check_cga_layout(bases, 1 << len(bases), 2)
    for d, (n, k) in enumerate(zip(shape, cta_split(bases, 2))):
        if k > n:
            raise ValueError(f"cga_layout cuts dimension {d} into {k} pieces but the shape has only {n} there: "
                             f"make the shape at least {k} along dimension {d}")
    return LAYOUT_KINDS[kind][0](bases, shape), bases, shape


def ownership_figure(kind: str = "BlockedLayout", bases="[[0, 1], [1, 0]]", shape="16, 32", by: str = "cta"):
    """One ownership map (``by`` = cta, warp, lane or reg) of a layout with CTA bases ``bases``,
    drawn from Triton's own view by :func:`multicta_kernels.show.figures.ownership_map`. Raises ValueError on bad input.

    The figure's title names the layout, its bases and its shape; the axes title says how many
    CTAs the map colours (for ``by="cta"``); a ``*`` marks an element that several CTAs hold.
    """
    import matplotlib.pyplot as plt

    layout, bases, shape = make_layout(kind, bases, shape)
    if by not in FIELDS:
        raise ValueError(f"owner field: one of {', '.join(FIELDS)}, got {by!r}")
    shared = LAYOUT_KINDS[kind][1]
    if shared and by in ("warp", "lane"):
        raise ValueError(f"{kind} is shared memory: it has CTAs and offsets (reg), no {by}s")
    own = layouts.ownership(layout, shape)
    num_ctas = 1 << len(bases)
    fig, ax = plt.subplots(figsize=(min(11, 2.5 + shape[1] * 0.3), min(7, 1.6 + shape[0] * 0.3)))
    try:
        held = sorted({int(c) for c in own.cta.ravel()})
        what = {"cta": f"owner: CTA ({len(held)} of {num_ctas} CTAs hold a piece"
                       + ("; * = held by several" if (own.ctas_holding > 1).any() else "") + ")",
                "warp": "owner: warp", "lane": "owner: lane", "reg": "owner: register" if not shared else "offset in the CTA's buffer"}
        figures.ownership_map(own, by, ax=ax, title=what[by], annotate=own.cta.size <= 512)
    except Exception:
        plt.close(fig)
        raise
    fig.suptitle(f"{kind}, cga_layout={bases}, shape {shape}", fontsize=10)
    fig.tight_layout()
    return _finish(fig)


def coloured_ctas(fig) -> list:
    """The CTA ids an ownership figure colours (for tests and for a caption)."""
    import numpy as np
    im = fig.axes[0].images[0]
    return sorted(int(v) for v in np.unique(np.asarray(im.get_array())))


def barrier_html(state: BarrierState) -> str:
    """The state as HTML: barriers, who waits, and the trace so far."""
    parts = [f"<p><b>{html.escape(state.title)}</b></p>"]
    if state.error:
        parts.append(_message_html(state.error))
    if state.barriers:
        parts.append(_table_html(state.barriers, ["leader CTA", "group", "arrivals left / count", "bytes left",
                                                  "phases done", "parity in progress"]))
    else:
        parts.append("<p>(no barrier yet: run <code>init</code>)</p>")
    if state.waiting:
        who = "; ".join(f"CTA {c} waits on parity {p} (barrier of CTA {ld}, since operation {at})"
                        for c, p, ld, at in state.waiting)
        parts.append(f"<p><b>waiting:</b> {html.escape(who)}</p>")
    else:
        parts.append("<p><b>waiting:</b> nobody</p>")
    if state.trace:
        parts.append(_table_html(state.trace, ["#", "CTA", "event", "detail"]))
    return "\n".join(parts)


# ------------------------------------------------------------------------ (c) multicast receivers

def _acc_bases(acc_bases):
    bases = parse_bases(acc_bases, "accumulator bases", width=2)
    if not bases:
        raise ValueError("accumulator bases: at least one basis (a cluster of 2 or more CTAs)")
    return [tuple(b) for b in bases]


def receivers_table(acc_bases="[(1, 0), (2, 0)]", two_ctas: bool = False) -> list:
    """Rows [operand, tile, receiving CTAs, multicast mask] for an accumulator ``cga_layout``."""
    from .. import multicast as mc
    from ..gluon.operands import operand_cga_layouts
    acc = _acc_bases(acc_bases)
    a_b, b_b = operand_cga_layouts(acc, two_ctas)
    n = 1 << len(acc)
    rows = []
    for name, bases in (("A", a_b), ("B", b_b)):
        for tile, ctas in sorted(mc.receivers(list(bases), n).items()):
            rows.append([name, tile, ", ".join(map(str, ctas)), f"0b{mc.multicast_mask(list(bases), ctas[0], n):0{n}b}"])
    return rows


def receivers_figure(acc_bases="[(1, 0), (2, 0)]", two_ctas: bool = False):
    """:func:`multicta_kernels.show.figures.receivers` for these accumulator bases."""
    import matplotlib.pyplot as plt

    from ..gluon.operands import operand_cga_layouts
    acc = _acc_bases(acc_bases)
    operand_cga_layouts(acc, two_ctas)            # validates (ValueError) before anything is drawn
    fig, ax = plt.subplots(figsize=(3.6, 3.6))
    try:
        figures.receivers(acc, two_ctas, ax=ax)
    except Exception:
        plt.close(fig)
        raise
    fig.tight_layout()
    return _finish(fig)


# ------------------------------------------------------------------------------------ widgets

@dataclass
class View:
    """What an explorer shows now: a PNG and/or HTML, or a message saying what is wrong."""
    png: bytes | None = None
    html: str = ""
    error: str | None = None
    title: str = ""
    data: object = None             # the pure function's result (figure, state, rows), for tests

    def bundle(self) -> dict:
        """Display data for frontends without widgets (the rendered book, nbconvert)."""
        if self.error:
            return {"text/html": _message_html(self.error), "text/plain": self.error}
        out = {"text/plain": self.title or "(explorer)"}
        if self.png and not self.html:
            out["image/png"] = base64.b64encode(self.png).decode()
        else:
            img = (f'<img alt="{html.escape(self.title)}" src="data:image/png;base64,'
                   f'{base64.b64encode(self.png).decode()}"/>' if self.png else "")
            out["text/html"] = img + self.html
        return out


def _guard(render, values) -> View:
    """Run a renderer; turn a caller's mistake into a message instead of a traceback."""
    try:
        return render(**values)
    except (ValueError, TypeError, KeyError, IndexError) as e:
        return View(error=f"{e}")
    except Exception as e:  # noqa: BLE001 - a widget must not show a traceback; say what failed
        return View(error=f"{type(e).__name__}: {e}")


def _ownership_view(kind, bases, shape, by) -> View:
    fig = ownership_figure(kind, bases, shape, by)
    return View(png=_png(fig), title=fig._suptitle.get_text() + " | " + fig.axes[0].get_title(), data=fig)


def _barrier_view(bases, script, step) -> View:
    state = barrier_steps(bases, script, step)
    return View(html=barrier_html(state), title=state.title, data=state)


def _receivers_view(acc_bases, two_ctas) -> View:
    fig = receivers_figure(acc_bases, two_ctas)
    rows = receivers_table(acc_bases, two_ctas)
    return View(png=_png(fig), html=_table_html(rows, ["operand", "tile", "receiving CTAs", "multicast mask"]),
                title=fig.axes[0].get_title(), data=(fig, rows))


def _have_widgets() -> bool:
    if os.environ.get("MULTICTA_STATIC"):
        return False
    try:
        import ipywidgets  # noqa: F401
    except ImportError:
        return False
    return True


def _enable_colab():
    try:                                                    # Colab renders ipywidgets 8 only with this
        from google.colab import output  # type: ignore
        output.enable_custom_widget_manager()
    except Exception:  # noqa: BLE001 - not on Colab
        pass


def _static(view: View):
    """The static form of a view: a figure, an HTML table, or the message."""
    from IPython.display import HTML
    if view.error:
        return HTML(_message_html(view.error))
    if isinstance(view.data, BarrierState):
        return HTML(view.html)
    if isinstance(view.data, tuple):                        # receivers: figure and table
        return HTML(view.bundle()["text/html"])
    return view.data


@functools.lru_cache(maxsize=None)
def _explorer_class():
    import ipywidgets as W

    class Explorer(W.VBox):
        """A VBox of controls and an output area; ``view`` is what it shows now.

        Set a control's ``value`` (``explorer.controls["bases"].value = "[[1, 0]]"``) and ``view``
        follows. Its display data carries a static copy for frontends without widgets.
        """

        def __init__(self, render, controls: dict, heading: str, extra=()):
            self.render, self.controls, self.extra, self.name = render, controls, list(extra), heading
            self.heading = W.HTML(f"<b>{html.escape(heading)}</b>")
            self.image = W.Image(format="png", layout=W.Layout(max_width="100%"))
            self.table = W.HTML()
            self.message = W.HTML()
            boxes, row = [], []
            for c in controls.values():
                row.append(c)
                if len(row) == 3:
                    boxes.append(W.HBox(row))
                    row = []
            if row:
                boxes.append(W.HBox(row))
            super().__init__([self.heading, *boxes, *extra, self.message, self.image, self.table])
            self.view = View()
            for c in controls.values():
                c.observe(self._changed, names="value")
            self.refresh()

        def values(self) -> dict:
            return {k: c.value for k, c in self.controls.items()}

        def _changed(self, _change):
            self.refresh()

        def refresh(self) -> View:
            self.view = _guard(self.render, self.values())
            v = self.view
            self.message.value = _message_html(v.error) if v.error else ""
            self.image.value = v.png or b""
            self.image.layout.display = None if v.png else "none"
            self.table.value = v.html or ""
            return v

        def _repr_mimebundle_(self, **kwargs):
            data = super()._repr_mimebundle_(**kwargs)
            if isinstance(data, tuple):
                data = data[0]
            static = self.view.bundle()
            static["text/plain"] = f"{self.name} (interactive in Jupyter): {static['text/plain']}"
            return {**static, **(data or {}), "text/plain": static["text/plain"]}

    return Explorer


def ownership_explorer(kind: str = "BlockedLayout", bases="[[0, 1], [1, 0]]", shape="16, 32", by: str = "cta",
                       static: bool | None = None):
    """Explore ownership maps: layout kind, CTA bases, shape and owner field -> the map Triton gives."""
    if static or (static is None and not _have_widgets()):
        return _static(_guard(_ownership_view, dict(kind=kind, bases=bases, shape=shape, by=by)))
    import ipywidgets as W
    _enable_colab()
    text = str(bases) if not isinstance(bases, str) else bases
    dims = ", ".join(map(str, shape)) if not isinstance(shape, str) else shape
    controls = {
        "kind": W.Dropdown(options=list(LAYOUT_KINDS), value=kind, description="layout"),
        "bases": W.Text(value=text, description="cga_layout", continuous_update=False),
        "shape": W.Text(value=dims, description="shape", continuous_update=False),
        "by": W.ToggleButtons(options=list(FIELDS), value=by, description="owner"),
    }
    return _explorer_class()(_ownership_view, controls, "Ownership map (Triton's own layout view)")


def barrier_explorer(bases="[[0]]", script: str = HAND_OFF, step: int | None = None, static: bool | None = None):
    """Step through a barrier script on ``BarrierSim``: phase, parity and who waits after each operation."""
    if static or (static is None and not _have_widgets()):
        return _static(_guard(_barrier_view, dict(bases=bases, script=script, step=step)))
    import ipywidgets as W
    _enable_colab()
    try:
        n = len(parse_script(script, 1 << len(parse_bases(bases, width=1))))
    except ValueError:
        n = 0
    controls = {
        "bases": W.Text(value=str(bases) if not isinstance(bases, str) else bases, description="layout",
                        continuous_update=False),
        "script": W.Textarea(value=script, description="script", rows=12, continuous_update=False,
                             layout=W.Layout(width="30em")),
        "step": W.IntSlider(value=n if step is None else step, min=0, max=max(n, 1), description="step"),
    }
    back, fwd = W.Button(description="◀ back"), W.Button(description="step ▶")
    back.on_click(lambda _b: setattr(controls["step"], "value", max(0, controls["step"].value - 1)))
    fwd.on_click(lambda _b: setattr(controls["step"], "value", min(controls["step"].max, controls["step"].value + 1)))
    help_line = W.HTML(f"<small>{html.escape(OPS_HELP)}</small>")
    ex = _explorer_class()(_barrier_view, controls, "mbarrier stepper (BarrierSim)", extra=[W.HBox([back, fwd]), help_line])

    def resize(_change):                    # the slider follows the script's length
        try:
            m = len(parse_script(controls["script"].value, 1 << len(parse_bases(controls["bases"].value, width=1))))
        except ValueError:
            return
        controls["step"].max = max(m, 1)
        controls["step"].value = m
    controls["script"].observe(resize, names="value")
    controls["bases"].observe(resize, names="value")
    return ex


def receivers_explorer(acc_bases="[(1, 0), (2, 0)]", two_ctas: bool = False, static: bool | None = None):
    """Which CTAs receive which A and B tile for an accumulator layout (and the multicast masks)."""
    if static or (static is None and not _have_widgets()):
        return _static(_guard(_receivers_view, dict(acc_bases=acc_bases, two_ctas=two_ctas)))
    import ipywidgets as W
    _enable_colab()
    text = acc_bases if isinstance(acc_bases, str) else str([tuple(b) for b in acc_bases])
    controls = {
        "acc_bases": W.Text(value=text, description="C bases", continuous_update=False),
        "two_ctas": W.Checkbox(value=bool(two_ctas), description="2-CTA MMA"),
    }
    return _explorer_class()(_receivers_view, controls, "Multicast receivers (figures.receivers)")
