#!/usr/bin/env python3
"""Open every page of the rendered book, and every slide deck, in a real headless Chromium and fail on what a
reader (or a room) would see.

    python tools/browser_check.py _build/html                          # after `make book`; exit 1 on a problem
    python tools/browser_check.py _build/html --slides _build/slides   # and the decks of `make slides`
    python tools/browser_check.py --slides _build/slides               # the decks only
    python tools/browser_check.py _build/html --strict                 # layout findings fail too
    python tools/browser_check.py _build/html --slides _build/slides --screenshots _build/screenshots

For every HTML page of the book (search and index pages included; the Chinese edition's pages under
``zh_CN/`` too, each of which, like every English page, must carry the language switch) it checks, in the
browser, after the page has loaded in a 1440 x 900 window (``--width`` changes it):

- every ``<img>`` has loaded (``complete`` and ``naturalWidth > 0``): a missing figure fails;
- every link into the book (``href`` to a local file, with or without ``#anchor``) names a file
  that exists and, for an anchor, an ``id`` that exists in that file; local ``<script>`` and
  stylesheet files exist;
- no Python traceback is visible: no rendered error output (``.output.traceback``, ``.output.error``)
  and no ``Traceback (most recent call last)`` / IPython ``...Error  Traceback`` in the page's
  visible text.

and it reports the layout (a summary with counts per page; failures only with ``--strict``):

- ``wide code`` / ``wide output``: a code cell's source, or a text output, wider than its box (a
  horizontal scroll bar, or cut off): the cell and its widest line;
- ``table overflow``: a ``<table>`` wider than the page's column that does not scroll inside itself
  (tables that do scroll are counted, not reported);
- ``small font``: visible HTML text of the page's content under ``MIN_FONT_PX`` CSS pixels (text in
  images and SVG figures is not HTML text and is not measured).

For every deck (``*.slides.html``) of ``--slides`` it steps through the slides with reveal.js's own
API (``Reveal.getTotalSlides()``, ``Reveal.next()``, ``Reveal.getCurrentSlide()``) and fails on a deck
where reveal.js does not start, a slide the navigation does not reach (or a ``<section>`` nested deeper
than reveal.js shows), a blank slide (no visible text, image or table on the screen), a missing local
file, and any request to a URL that is not local: the decks must work in a room without internet.
Requests to other hosts are blocked (for the book's pages too, so every check sees what an offline
reader sees), and reported for the decks.

Chromium is driven through the DevTools protocol over a pipe (``--remote-debugging-pipe``): the
standard library only, no WebDriver, no websocket client. If no Chromium is installed the check prints
``SKIPPED`` with the reason and exits 0 (1 with ``--require-browser``); ``.ci/run`` installs Debian's
``chromium`` first, so CI does not skip.
"""
from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--disable-extensions", "--mute-audio", "--hide-scrollbars",
         "--disable-dev-shm-usage", "--remote-debugging-pipe"]

# A laptop's window: at 1440 px and wider the book's text column has its full width (code: 87 characters at
# the theme's 14 px), so a line that scrolls here scrolls for every reader.
VIEWPORT = {"width": 1440, "height": 900, "deviceScaleFactor": 1, "mobile": False}
MIN_FONT_PX = 12          # smallest HTML text of a page's content the layout check accepts
LOCAL_SCHEMES = {"file", "data", "blob", "about", "chrome", "devtools"}
BLOCKED = ["http://*", "https://*", "ws://*", "wss://*", "ftp://*"]

# The book's other editions, each in its own folder of the site (tools/i18n.py): their pages are checked like the
# English ones, and where one is built every page must carry the language switch (tools/i18n_sphinx.py).
EDITIONS = ("zh_CN",)

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "chrome",
              "headless_shell", "chromium-headless-shell")

# What the page reports: the images, the local links and resources, and any visible traceback.
PAGE_SCRIPT = r"""
(async () => {
  const imgs = Array.from(document.images);
  for (const im of imgs) { im.loading = "eager"; }
  await Promise.all(imgs.map(im => im.complete ? null : new Promise(ok => {
    im.addEventListener("load", ok); im.addEventListener("error", ok); setTimeout(ok, 5000); })));
  const text = document.body ? document.body.innerText : "";
  const tb = [];
  const re = /Traceback \(most recent call last\)|^\S*(Error|Exception)\s+Traceback \(most recent call last\)|^-{20,}\n\w*(Error|Exception)\b/m;
  const m = text.match(re);
  if (m) { const i = m.index; tb.push(text.slice(Math.max(0, i - 80), i + 240)); }
  for (const el of document.querySelectorAll(".output.traceback, .output.error, div.cell_output .traceback")) {
    if (el.offsetParent !== null || el.getClientRects().length) tb.push(el.innerText.slice(0, 240));
  }
  const MIN_FONT = %MIN_FONT%;
  const cells = Array.from(document.querySelectorAll("div.cell"));
  const where = el => {
    const c = el.closest("div.cell");
    const sec = el.closest("section[id]");
    return (c ? "cell " + (cells.indexOf(c) + 1) : "code block") + (sec ? " (#" + sec.id + ")" : "");
  };
  const visible = el => el.checkVisibility({checkOpacity: true, checkVisibilityCSS: true});
  const layout = [];
  let scrollingTables = 0;
  const seenPre = new Set();
  for (const pre of document.querySelectorAll("pre")) {
    if (seenPre.has(pre) || !visible(pre)) continue;
    seenPre.add(pre);
    const box = pre.parentElement && pre.parentElement.classList.contains("highlight") &&
                pre.parentElement.scrollWidth > pre.parentElement.clientWidth + 1 ? pre.parentElement : pre;
    if (box.scrollWidth <= box.clientWidth + 1) continue;
    const lines = pre.innerText.split("\n");
    const widest = lines.reduce((a, b) => b.length > a.length ? b : a, "");
    const output = !!pre.closest(".cell_output, .output, .jp-OutputArea");
    layout.push({kind: output ? "wide output" : "wide code",
                 detail: where(pre) + ": " + box.scrollWidth + " px in " + box.clientWidth + " px; widest line " +
                         widest.length + " chars: " + JSON.stringify(widest.trim().slice(0, 90))});
  }
  const column = document.querySelector("article") || document.querySelector("main, [role=main]") || document.body ||
                 document.documentElement;                       // the page's text column (article.bd-article)
  const col = column.getBoundingClientRect();
  for (const t of document.querySelectorAll("table")) {
    if (!visible(t) || t.closest("pre")) continue;
    let scroller = null;
    for (let a = t.parentElement; a && a !== column && a !== document.body; a = a.parentElement) {
      const ox = getComputedStyle(a).overflowX;
      if (ox === "auto" || ox === "scroll") { scroller = a; break; }
    }
    const r = (scroller || t).getBoundingClientRect();
    const inside = r.width <= col.width + 1 && r.right <= col.right + 1 && r.left >= col.left - 1;
    if (scroller && inside) {
      if (scroller.scrollWidth > scroller.clientWidth + 1) scrollingTables += 1;
      continue;
    }
    const tw = t.getBoundingClientRect().width;
    if (inside && tw <= col.width + 1) continue;
    const head = t.rows.length ? t.rows[0].innerText.replace(/\s+/g, " ").trim().slice(0, 80) : "";
    layout.push({kind: "table overflow",
                 detail: where(t).replace("code block", "table") + ": " + Math.round(tw) + " px wide in a " +
                         Math.round(col.width) + " px column; first row " + JSON.stringify(head)});
  }
  const sizes = new Map();
  let small = 0, smallest = null, example = "";
  const walker = document.createTreeWalker(column, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    if (!n.data.trim()) continue;
    const el = n.parentElement;
    if (!el || el.closest("svg, script, style, noscript")) continue;
    if (!sizes.has(el)) sizes.set(el, visible(el) && el.getClientRects().length ?
                                      parseFloat(getComputedStyle(el).fontSize) : null);
    const fs = sizes.get(el);
    if (fs === null || fs >= MIN_FONT) continue;
    small += 1;
    if (smallest === null || fs < smallest) {
      smallest = fs;
      example = el.tagName.toLowerCase() + (el.className ? "." + String(el.className).split(" ")[0] : "") +
                " " + JSON.stringify(n.data.trim().slice(0, 50));
    }
  }
  if (small) layout.push({kind: "small font", detail: small + " text run(s) under " + MIN_FONT + " px, the smallest " +
                                                      smallest + " px: " + example});
  return {
    title: document.title,
    layout: layout,
    scrolling_tables: scrollingTables,
    images: imgs.map(im => ({src: im.currentSrc || im.src, ok: im.complete && im.naturalWidth > 0,
                             alt: im.alt || ""})),
    links: Array.from(document.querySelectorAll("a[href]")).map(a => a.href),
    resources: Array.from(document.querySelectorAll("script[src], link[rel=stylesheet][href]"))
                    .map(e => e.src || e.href),
    tracebacks: tb,
  };
})()
"""


def find_chromium() -> str | None:
    """The Chromium (or Chrome) binary: $CHROMIUM, then the usual names on PATH."""
    env = os.environ.get("CHROMIUM")
    if env:
        return env if shutil.which(env) or Path(env).exists() else None
    for name in CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


class BrowserError(RuntimeError):
    pass


class Browser:
    """A headless Chromium driven over ``--remote-debugging-pipe`` (fd 3: commands, fd 4: replies)."""

    def __init__(self, binary: str, timeout: float = 60.0):
        self.timeout = timeout
        self._profile = tempfile.mkdtemp(prefix="browser-check-")
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def child_fds():                      # runs in the child: the pipe ends become fds 3 and 4
            r, w = os.dup(to_chrome_r), os.dup(from_chrome_w)     # both above 4: dup2 cannot clobber
            os.dup2(r, 3)                                         # dup2 leaves 3 and 4 inheritable
            os.dup2(w, 4)
        self._log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen([binary, *FLAGS, f"--user-data-dir={self._profile}", "about:blank"],
                                     stdin=subprocess.DEVNULL, stdout=self._log, stderr=self._log,
                                     preexec_fn=child_fds, close_fds=False)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buf = b""
        self._id = 0
        self._events: list[dict] = []
        try:
            self.call("Browser.getVersion")
        except (BrowserError, OSError) as e:
            self.close()
            raise BrowserError(f"{binary} did not answer on the DevTools pipe: {e}") from None

    # -- protocol
    def _read_message(self, deadline: float) -> dict:
        import select
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise BrowserError("timed out waiting for the browser")
            ready, _, _ = select.select([self._from_chrome], [], [], left)
            if not ready:
                continue
            chunk = os.read(self._from_chrome, 1 << 20)
            if not chunk:
                raise BrowserError("the browser closed the pipe (it crashed or exited); its log:\n"
                                   + self.log_tail())
            self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method: str, params: dict | None = None, session: str | None = None,
             timeout: float | None = None) -> dict:
        self._id += 1
        msg = {"id": self._id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        try:
            os.write(self._to_chrome, json.dumps(msg).encode() + b"\0")
        except BrokenPipeError:
            raise BrowserError("the browser is gone (it crashed or exited); its log:\n" + self.log_tail()) from None
        deadline = time.monotonic() + (timeout or self.timeout)
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error'].get('message')}")
                return reply.get("result", {})
            if "method" in reply:
                self._events.append(reply)

    def wait_event(self, method: str, session: str, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while True:
            for i, ev in enumerate(self._events):
                if ev.get("method") == method and ev.get("sessionId") == session:
                    del self._events[i]
                    return True
            try:
                ev = self._read_message(deadline)
            except BrowserError:
                if time.monotonic() >= deadline:
                    return False
                raise
            if "method" in ev:
                self._events.append(ev)

    # -- pages
    screenshots: Path | None = None      # where run_script saves a PNG of what it checked (--screenshots)

    def run_script(self, url: str, script: str, load_timeout: float = 30.0, shot: str | None = None,
                   before_shot: str | None = None) -> dict:
        """Load ``url`` in a fresh tab (a ``VIEWPORT`` window, other hosts blocked), run ``script`` (a promise)
        and return its value, with ``loaded``, ``requests`` (every URL the tab asked for) and ``failed``
        (local URLs that did not load). With ``screenshots`` set, save the window as ``shot`` (after running
        ``before_shot``)."""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        try:
            self.call("Page.enable", session=session)
            self.call("Network.enable", session=session)
            self.call("Network.setBlockedURLs", {"urls": BLOCKED}, session=session)
            self.call("Emulation.setDeviceMetricsOverride", VIEWPORT, session=session)
            self._events.clear()
            self.call("Page.navigate", {"url": url}, session=session)
            loaded = self.wait_event("Page.loadEventFired", session, load_timeout)
            for attempt in range(3):
                try:
                    result = self.call("Runtime.evaluate", {"expression": script, "awaitPromise": True,
                                                            "returnByValue": True}, session=session,
                                       timeout=max(self.timeout, 120))
                    break
                except BrowserError as e:            # a page that redirects (index.html) navigated meanwhile
                    if attempt == 2 or not re.search(r"navigated or closed|context was destroyed", str(e)):
                        raise
                    loaded = self.wait_event("Page.loadEventFired", session, load_timeout)
            if "exceptionDetails" in result:
                details = result["exceptionDetails"]
                text = (details.get("exception") or {}).get("description") or details.get("text")
                raise BrowserError(f"the page script failed on {url}: {text}")
            report = result["result"]["value"]
            report["loaded"] = loaded
            if self.screenshots is not None and shot:
                if before_shot:
                    self.call("Runtime.evaluate", {"expression": before_shot, "awaitPromise": True}, session=session)
                png = self.call("Page.captureScreenshot", {"format": "png"}, session=session)["data"]
                self.screenshots.mkdir(parents=True, exist_ok=True)
                (self.screenshots / shot).write_bytes(base64.b64decode(png))
            ids, report["requests"], report["failed"] = {}, [], []
            for ev in self._events:
                if ev.get("sessionId") != session:
                    continue
                if ev.get("method") == "Network.requestWillBeSent":
                    ids[ev["params"]["requestId"]] = ev["params"]["request"]["url"]
                    report["requests"].append(ev["params"]["request"]["url"])
                elif ev.get("method") == "Network.loadingFailed":
                    u = ids.get(ev["params"]["requestId"], "?")
                    if urllib.parse.urlsplit(u).scheme in LOCAL_SCHEMES:
                        report["failed"].append(f"{u} ({ev['params'].get('errorText', '')})")
            self._events = [ev for ev in self._events if ev.get("sessionId") != session]
            return report
        finally:
            try:
                self.call("Target.closeTarget", {"targetId": target})
            except BrowserError:
                pass

    def wait_attached(self, pred, timeout: float) -> dict | None:
        """The params of a ``Target.attachedToTarget`` event that ``pred`` accepts (None after ``timeout``)."""
        deadline = time.monotonic() + timeout
        while True:
            for i, ev in enumerate(self._events):
                if ev.get("method") == "Target.attachedToTarget" and pred(ev["params"]):
                    del self._events[i]
                    return ev["params"]
            if time.monotonic() >= deadline:
                return None
            try:
                ev = self._read_message(min(deadline, time.monotonic() + 0.5))
            except BrowserError as e:
                if "timed out" not in str(e):
                    raise
                continue
            if "method" in ev:
                self._events.append(ev)

    def evaluate(self, session: str, expression: str, gesture: bool = False, timeout: float | None = None):
        result = self.call("Runtime.evaluate", {"expression": expression, "awaitPromise": True, "returnByValue": True,
                                                "userGesture": gesture}, session=session, timeout=timeout)
        if "exceptionDetails" in result:
            details = result["exceptionDetails"]
            raise BrowserError((details.get("exception") or {}).get("description") or details.get("text"))
        return result["result"].get("value")

    def inspect(self, url: str, load_timeout: float = 30.0, shot: str | None = None) -> dict:
        """Load ``url`` in a fresh tab and return what PAGE_SCRIPT reports."""
        return self.run_script(url, PAGE_SCRIPT.replace("%MIN_FONT%", str(MIN_FONT_PX)), load_timeout, shot)

    def log_tail(self, n: int = 2000) -> str:
        self._log.seek(0)
        return self._log.read().decode(errors="replace")[-n:]

    def close(self):
        try:
            os.write(self._to_chrome, json.dumps({"id": 0, "method": "Browser.close"}).encode() + b"\0")
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._to_chrome, self._from_chrome):
            try:
                os.close(fd)
            except OSError:
                pass
        self._log.close()
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# ------------------------------------------------------------------------------- the checks

@dataclass
class Report:
    pages: int = 0
    problems: list = field(default_factory=list)      # (page, kind, detail): always fail
    layout: list = field(default_factory=list)        # (page, kind, detail): fail with strict only
    scrolling_tables: int = 0                          # tables that scroll inside themselves (fine)
    decks: int = 0
    slides: int = 0
    strict: bool = False

    @property
    def ok(self) -> bool:
        return not self.problems and not (self.strict and self.layout)

    def layout_counts(self) -> dict:
        """{page: {kind: count}} of the layout findings."""
        counts: dict = {}
        for page, kind, _ in self.layout:
            counts.setdefault(page, {}).setdefault(kind, 0)
            counts[page][kind] += 1
        return counts

    def layout_summary(self, details: int = 5) -> str:
        if not self.layout:
            return f"layout: no finding ({self.scrolling_tables} tables scroll inside themselves)"
        kinds = sorted({k for _, k, _ in self.layout})
        lines = [f"layout ({'fails: --strict' if self.strict else 'reported, not failed; --strict fails'}):"]
        width = max(len(p) for p, _, _ in self.layout)
        lines.append("  " + "page".ljust(width) + "".join(f"  {k:>14}" for k in kinds))
        for page, counts in sorted(self.layout_counts().items()):
            lines.append("  " + page.ljust(width) + "".join(f"  {counts.get(k, 0):>14}" for k in kinds))
        totals = {k: sum(1 for _, kk, _ in self.layout if kk == k) for k in kinds}
        lines.append("  " + "total".ljust(width) + "".join(f"  {totals[k]:>14}" for k in kinds))
        shown: dict = {}
        for page, kind, detail in self.layout:
            if shown.setdefault((page, kind), 0) < details:
                lines.append(f"  {page}: {kind}: {detail}")
            shown[(page, kind)] += 1
        lines.append(f"  ({self.scrolling_tables} tables scroll inside themselves; at most {details} findings "
                     f"shown per page and kind)")
        return "\n".join(lines)

    def summary(self) -> str:
        lines = [f"{page}: {kind}: {detail}" for page, kind, detail in self.problems]
        if self.pages:
            lines.append(self.layout_summary())
        what = []
        if self.pages:
            what.append(f"{self.pages} pages")
        if self.decks:
            what.append(f"{self.decks} decks ({self.slides} slides)")
        failing = len(self.problems) + (len(self.layout) if self.strict else 0)
        lines.append(f"browser check: {', '.join(what) or 'nothing'}, {failing} problems"
                     + (f", {len(self.layout)} layout findings" if self.layout and not self.strict else ""))
        return "\n".join(lines)


_IDS: dict[Path, set] = {}
_REFRESH = re.compile(r"""<meta\s+http-equiv=["']?refresh["']?\s+content=["']?\s*\d+\s*;\s*url=([^"'>\s]+)""", re.I)


def _ids_of(path: Path) -> set:
    if path not in _IDS:
        text = path.read_text(errors="replace")
        _IDS[path] = set(re.findall(r'\b(?:id|name)\s*=\s*"([^"]+)"', text)) | \
            set(re.findall(r"\b(?:id|name)\s*=\s*'([^']+)'", text))
    return _IDS[path]


def _local_path(url: str, root: Path) -> tuple[Path, str] | None:
    """(file, fragment) for a file:// URL inside the site, None for anything else."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme != "file":
        return None
    path = Path(urllib.parse.unquote(parts.path))
    try:
        path.resolve().relative_to(root)
    except ValueError:
        return None
    return path, urllib.parse.unquote(parts.fragment)


def check_page(browser: Browser, page: Path, root: Path) -> tuple[list, list, int]:
    """(problems, layout findings, scrolling tables) of one page of the book."""
    rel = str(page.relative_to(root))
    problems = []
    refresh = _REFRESH.search(page.read_text(errors="replace")[:4000])
    if refresh:                          # a redirect (the site's index.html): its target must exist; nothing to see
        target = (page.parent / urllib.parse.unquote(refresh.group(1).split("#")[0])).resolve()
        if not (target / "index.html" if target.is_dir() else target).exists():
            problems.append((rel, "broken link", f"redirect to {refresh.group(1)}"))
        return problems, [], 0
    if any((root / ed).is_dir() for ed in EDITIONS) and "i18n-switch" not in page.read_text(errors="replace"):
        problems.append((rel, "no language switch", "no link to this page in the book's other edition"))
    info = browser.inspect(page.resolve().as_uri(), shot=rel.replace("/", "__").removesuffix(".html") + ".png")
    if not info["loaded"]:
        problems.append((rel, "load", "the page did not finish loading in time"))
    for im in info["images"]:
        if not im["ok"]:
            problems.append((rel, "missing image", f"{im['src']} (alt {im['alt']!r})"))
    for url in info["links"]:
        local = _local_path(url, root)
        if local is None:
            continue
        path, frag = local
        if path.is_dir():
            path = path / "index.html"
        if not path.exists():
            problems.append((rel, "broken link", url))
        elif frag and path.suffix == ".html" and frag not in _ids_of(path):
            problems.append((rel, "broken anchor", url))
    for url in info["resources"]:
        local = _local_path(url, root)
        if local is not None and not local[0].exists():
            problems.append((rel, "missing resource", url))
    for tb in info["tracebacks"]:
        problems.append((rel, "visible traceback", " ".join(tb.split())[:200]))
    layout = [(rel, f["kind"], f["detail"]) for f in info["layout"]]
    return problems, layout, info["scrolling_tables"]


def pages_of(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.html")
                  if not {"_static", "_sources", "_images"} & set(p.relative_to(root).parts))


def check_site(root, binary: str | None = None, log=print, strict: bool = False,
               report: Report | None = None, browser: Browser | None = None) -> Report:
    """Check every page under ``root``; raise FileNotFoundError if there is no site or no browser."""
    root = Path(root).resolve()
    if not (root / "index.html").exists():
        raise FileNotFoundError(f"no rendered book at {root} (run `make book` first)")
    report = report or Report(strict=strict)
    if browser is None:
        binary = binary or find_chromium()
        if not binary:
            raise FileNotFoundError("no Chromium found (apt-get install chromium, or set $CHROMIUM)")
        with Browser(binary) as b:
            return check_site(root, binary, log, strict, report, b)
    _IDS.clear()
    for page in pages_of(root):
        found, layout, scrolling = check_page(browser, page, root)
        report.pages += 1
        report.problems += found
        report.layout += layout
        report.scrolling_tables += scrolling
        if log:
            log(f"  {'ok ' if not found else 'BAD'} {page.relative_to(root)}"
                + (f"  ({len(layout)} layout findings)" if layout else ""))
    return report


# ------------------------------------------------------------------------------- the slide decks

# Steps through a reveal.js deck with its own API; reports what the navigation reached and what each
# slide shows on the screen (text, image, table, figure outside the speaker notes).
DECK_SCRIPT = r"""
(async () => {
  const sleep = ms => new Promise(ok => setTimeout(ok, ms));
  const frame = () => new Promise(ok => requestAnimationFrame(() => ok()));
  const t0 = Date.now();
  while (!(window.Reveal && Reveal.isReady && Reveal.isReady()) && Date.now() - t0 < 15000) await sleep(50);
  if (!(window.Reveal && Reveal.isReady && Reveal.isReady()))
    return {ready: false, reveal: !!window.Reveal};
  const imgs = Array.from(document.images);
  for (const im of imgs) { im.loading = "eager"; }
  await Promise.all(imgs.map(im => im.complete ? null : new Promise(ok => {
    im.addEventListener("load", ok); im.addEventListener("error", ok); setTimeout(ok, 5000); })));
  const deck = document.querySelector(".reveal .slides");
  const kids = el => Array.from(el.children).filter(c => c.tagName === "SECTION");
  const dom = [];
  kids(deck).forEach((top, h) => {
    const subs = kids(top);
    if (subs.length) subs.forEach((s, v) => dom.push(h + "." + v)); else dom.push(h + ".0");
  });
  const deep = deck.querySelectorAll(":scope > section > section section").length;
  const vw = innerWidth, vh = innerHeight;
  const onScreen = r => r.width > 0 && r.height > 0 && r.right > 0 && r.bottom > 0 && r.left < vw && r.top < vh;
  const visible = el => el.checkVisibility({checkOpacity: true, checkVisibilityCSS: true});
  const shows = slide => {
    const walker = document.createTreeWalker(slide, NodeFilter.SHOW_TEXT);
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      if (!n.data.trim()) continue;
      const el = n.parentElement;
      if (!el || el.closest("aside.notes, script, style") || !visible(el)) continue;
      const range = document.createRange();
      range.selectNodeContents(n);
      for (const r of range.getClientRects()) if (onScreen(r)) return true;
    }
    for (const el of slide.querySelectorAll("img, svg, canvas, video, table")) {
      if (el.closest("aside.notes") || !visible(el)) continue;
      if (el.tagName === "IMG" && !(el.complete && el.naturalWidth > 0)) continue;
      if (onScreen(el.getBoundingClientRect())) return true;
    }
    return false;
  };
  const title = slide => {
    const h = slide.querySelector("h1, h2, h3, h4, p, pre");
    return h ? h.textContent.replace(/\s+/g, " ").replace(/¶/g, "").trim().slice(0, 60) : "";
  };
  const total = Reveal.getTotalSlides();
  Reveal.slide(0, 0);
  await frame();
  const seen = [], blank = [];
  for (let i = 0; i < total + 5; i++) {
    const idx = Reveal.getIndices();
    const key = idx.h + "." + (idx.v || 0);
    if (seen.includes(key)) break;
    seen.push(key);
    const cur = Reveal.getCurrentSlide();
    if (!shows(cur)) blank.push(key + " " + JSON.stringify(title(cur)));
    if (Reveal.isLastSlide()) break;
    Reveal.next();
    await frame();
  }
  const notes = Array.from(document.querySelectorAll(".reveal .slides aside.notes"))
                     .filter(a => a.textContent.trim()).length;
  return {ready: true, total: total, dom: dom, deep: deep, seen: seen, blank: blank, notes: notes,
          notes_plugin: !!(Reveal.getPlugin && Reveal.getPlugin("notes")),
          missing_images: imgs.filter(im => !(im.complete && im.naturalWidth > 0)).map(im => im.src.slice(0, 80))};
})()
"""


# For a screenshot: the first slide with a figure (or the title slide).
FIGURE_SLIDE = r"""
(async () => {
  const img = Array.from(document.querySelectorAll(".reveal .slides img")).find(im => !im.closest("aside.notes"));
  if (window.Reveal && Reveal.isReady()) {
    if (img) { const i = Reveal.getIndices(img.closest("section")); Reveal.slide(i.h, i.v || 0); }
    else Reveal.slide(0, 0);
  }
  await new Promise(ok => requestAnimationFrame(() => setTimeout(ok, 200)));
})()
"""


def check_deck(browser: Browser, deck: Path) -> tuple[list, int]:
    """(problems, slides shown) of one reveal.js deck."""
    name = deck.name
    info = browser.run_script(deck.resolve().as_uri(), DECK_SCRIPT, shot=name.removesuffix(".html") + ".png",
                              before_shot=FIGURE_SLIDE)
    problems = []
    for url in info["requests"]:
        if urllib.parse.urlsplit(url).scheme not in LOCAL_SCHEMES:
            problems.append((name, "non-local request", url[:160]))
    for url in info["failed"]:
        problems.append((name, "missing resource", url[:160]))
    if not info.get("ready"):
        problems.append((name, "no slides", "reveal.js did not start" + ("" if info.get("reveal") else
                                                                          " (reveal.js did not load)")))
        return problems, 0
    if info["deep"]:
        problems.append((name, "unreachable", f"{info['deep']} <section>s nested deeper than reveal.js shows"))
    if info["total"] != len(info["dom"]):
        problems.append((name, "unreachable", f"reveal.js counts {info['total']} slides, the deck has "
                                              f"{len(info['dom'])}"))
    missed = [k for k in info["dom"] if k not in info["seen"]]
    if missed:
        problems.append((name, "unreachable", f"{len(missed)} of {len(info['dom'])} slides not reached by "
                                              f"Reveal.next() (first: {missed[0]}; the navigation stopped after "
                                              f"{len(info['seen'])})"))
    for b in info["blank"]:
        problems.append((name, "blank slide", b))
    for src in info["missing_images"]:
        problems.append((name, "missing image", src))
    if info["notes"] and not info["notes_plugin"]:
        problems.append((name, "no speaker notes", f"{info['notes']} notes but no notes plugin"))
    return problems, len(info["seen"])


# Go to the first slide with speaker notes and open reveal.js's speaker view (a pop-up, as pressing ``s``).
OPEN_NOTES = r"""
(async () => {
  const t0 = Date.now();
  while (!(window.Reveal && Reveal.isReady && Reveal.isReady()) && Date.now() - t0 < 15000)
    await new Promise(ok => setTimeout(ok, 50));
  const aside = Array.from(document.querySelectorAll(".reveal .slides aside.notes")).find(a => a.textContent.trim());
  if (!aside || !Reveal.getPlugin || !Reveal.getPlugin("notes")) return null;
  const idx = Reveal.getIndices(aside.closest("section"));
  Reveal.slide(idx.h, idx.v || 0);
  setTimeout(() => Reveal.getPlugin("notes").open(), 0);     // after this script returns: the pop-up may wait
  return aside.textContent.replace(/\s+/g, " ").trim().slice(0, 40);
})()
"""

SPEAKER_VIEW = r"""
(async () => {
  const t0 = Date.now();
  let value = "";
  while (Date.now() - t0 < 10000) {
    const el = document.querySelector(".speaker-controls-notes .value");
    value = el ? el.innerText.replace(/\s+/g, " ").trim() : "";
    if (value && document.querySelectorAll("iframe").length) break;
    await new Promise(ok => setTimeout(ok, 100));
  }
  const status = document.querySelector("#connection-status");
  return {title: document.title, notes: value, frames: Array.from(document.querySelectorAll("iframe")).map(f => f.src),
          status: status && status.offsetParent !== null ? status.innerText.trim() : ""};
})()
"""


def check_speaker_view(browser: Browser, deck: Path) -> list:
    """Open the speaker view of a deck with notes and check that it shows them, from local files only."""
    name = deck.name
    problems = []
    browser.call("Target.setAutoAttach", {"autoAttach": True, "waitForDebuggerOnStart": False, "flatten": True})
    target = browser.call("Target.createTarget", {"url": "about:blank"})["targetId"]
    popup = None
    try:
        session = browser.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        browser.call("Page.enable", session=session)
        browser.call("Network.setBlockedURLs", {"urls": BLOCKED}, session=session)
        browser.call("Network.enable", session=session)
        browser.call("Page.navigate", {"url": deck.resolve().as_uri()}, session=session)
        browser.wait_event("Page.loadEventFired", session, 30)
        expected = browser.evaluate(session, OPEN_NOTES, gesture=True, timeout=60)
        if expected is None:
            return []                                            # no notes in this deck: nothing to open
        params = browser.wait_attached(lambda p: p["targetInfo"].get("openerId") == target, 10)
        if params is None:
            return [(name, "no speaker view", "pressing s (the notes plugin) opened no window")]
        popup, ps = params["targetInfo"]["targetId"], params["sessionId"]
        browser.call("Network.setBlockedURLs", {"urls": BLOCKED}, session=ps)
        browser.call("Network.enable", session=ps)
        browser.call("Runtime.runIfWaitingForDebugger", session=ps)   # auto-attached pop-ups wait for it
        view = browser.evaluate(ps, SPEAKER_VIEW, timeout=60)
        if view["status"]:
            problems.append((name, "no speaker view", view["status"][:120]))
        elif expected[:20] not in view["notes"]:
            problems.append((name, "no speaker notes", f"the speaker view shows {view['notes'][:40]!r}, "
                                                       f"not the slide's notes {expected!r}"))
        for url in view["frames"]:
            if urllib.parse.urlsplit(url).scheme not in LOCAL_SCHEMES:
                problems.append((name, "non-local request", f"speaker view frame {url[:120]}"))
        for ev in browser._events:
            if ev.get("method") == "Network.requestWillBeSent" and ev.get("sessionId") in (session, ps):
                url = ev["params"]["request"]["url"]
                if urllib.parse.urlsplit(url).scheme not in LOCAL_SCHEMES:
                    problems.append((name, "non-local request", f"speaker view: {url[:120]}"))
        return problems
    finally:
        browser.call("Target.setAutoAttach", {"autoAttach": False, "waitForDebuggerOnStart": False, "flatten": True})
        for t in (popup, target):
            if t:
                try:
                    browser.call("Target.closeTarget", {"targetId": t})
                except BrowserError:
                    pass
        browser._events.clear()


def decks_of(folder: Path) -> list[Path]:
    return sorted(Path(folder).glob("*.slides.html"))


def check_decks(folder, binary: str | None = None, log=print, report: Report | None = None,
                browser: Browser | None = None, notes: bool = True) -> Report:
    """Step through every ``*.slides.html`` in ``folder`` (and open each one's speaker view unless
    ``notes=False``); FileNotFoundError if there is no deck (or no browser)."""
    folder = Path(folder)
    decks = decks_of(folder)
    if not decks:
        raise FileNotFoundError(f"no slide decks (*.slides.html) in {folder} (run `make slides` first)")
    report = report or Report()
    if browser is None:
        binary = binary or find_chromium()
        if not binary:
            raise FileNotFoundError("no Chromium found (apt-get install chromium, or set $CHROMIUM)")
        with Browser(binary) as b:
            return check_decks(folder, binary, log, report, b, notes)
    for deck in decks:
        found, shown = check_deck(browser, deck)
        if shown and notes:
            found += check_speaker_view(browser, deck)
        report.decks += 1
        report.slides += shown
        report.problems += found
        if log:
            log(f"  {'ok ' if not found else 'BAD'} {deck.name}  ({shown} slides)")
    return report


def main(argv=None) -> int:
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("site", nargs="?", default=None,
                    help="the rendered book (default _build/html, unless only --slides is given)")
    ap.add_argument("--slides", type=Path, metavar="DIR", help="also step through the decks in DIR (make slides)")
    ap.add_argument("--strict", action="store_true",
                    help="fail on layout findings too (wide code, overflowing tables, small fonts)")
    ap.add_argument("--width", type=int, default=VIEWPORT["width"],
                    help=f"the window's width in CSS pixels (default {VIEWPORT['width']})")
    ap.add_argument("--screenshots", type=Path, metavar="DIR",
                    help="save a PNG of every page (its first screen) and of every deck (a slide with a figure)")
    ap.add_argument("--require-browser", action="store_true",
                    help="fail instead of skipping when no Chromium is installed")
    ap.add_argument("-q", "--quiet", action="store_true", help="print problems and the summary only")
    args = ap.parse_args(argv)
    site = args.site if args.site is not None else (None if args.slides else "_build/html")
    if args.width < 320:
        ap.error(f"--width {args.width}: give a window width of at least 320 CSS pixels")
    VIEWPORT["width"] = args.width
    binary = find_chromium()
    if not binary:
        msg = ("browser check SKIPPED: no Chromium on this machine (install Debian's `chromium` "
               "package, or set $CHROMIUM to a Chrome/Chromium binary)")
        print(msg)
        return 1 if args.require_browser else 0
    t0 = time.monotonic()
    log = None if args.quiet else print
    report = Report(strict=args.strict)
    try:
        with Browser(binary) as browser:
            browser.screenshots = args.screenshots
            if site is not None:
                check_site(site, binary, log=log, report=report, browser=browser)
            if args.slides is not None:
                check_decks(args.slides, binary, log=log, report=report, browser=browser)
    except (FileNotFoundError, BrowserError) as e:
        print(f"browser check FAILED: {e}")
        return 1
    print(report.summary() + f" ({time.monotonic() - t0:.0f} s, {Path(binary).name})")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
