#!/usr/bin/env python3
"""Open every page of the rendered book in a real headless Chromium and fail on what a reader would see.

    python tools/browser_check.py _build/html          # after `make book`; exit status 1 on a problem

For every HTML page (search and index pages included) it checks, in the browser, after the page
has loaded:

- every ``<img>`` has loaded (``complete`` and ``naturalWidth > 0``): a missing figure fails;
- every link into the book (``href`` to a local file, with or without ``#anchor``) names a file
  that exists and, for an anchor, an ``id`` that exists in that file; local ``<script>`` and
  stylesheet files exist;
- no Python traceback is visible: no rendered error output (``.output.traceback``, ``.output.error``)
  and no ``Traceback (most recent call last)`` / IPython ``...Error  Traceback`` in the page's
  visible text.

Chromium is driven through the DevTools protocol over a pipe (``--remote-debugging-pipe``): the
standard library only, no WebDriver, no websocket client. External URLs are not fetched for the
checks (the browser may try to load CDN scripts; with no network those fail quietly and are not
reported). If no Chromium is installed the check prints ``SKIPPED`` with the reason and exits 0;
``.ci/run`` installs Debian's ``chromium`` first, so CI does not skip.
"""
from __future__ import annotations

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
  return {
    title: document.title,
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
    def inspect(self, url: str, load_timeout: float = 30.0) -> dict:
        """Load ``url`` in a fresh tab and return what PAGE_SCRIPT reports."""
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        try:
            self.call("Page.enable", session=session)
            self._events.clear()
            self.call("Page.navigate", {"url": url}, session=session)
            loaded = self.wait_event("Page.loadEventFired", session, load_timeout)
            result = self.call("Runtime.evaluate", {"expression": PAGE_SCRIPT, "awaitPromise": True,
                                                    "returnByValue": True}, session=session)
            if "exceptionDetails" in result:
                raise BrowserError(f"the page script failed on {url}: {result['exceptionDetails'].get('text')}")
            report = result["result"]["value"]
            report["loaded"] = loaded
            return report
        finally:
            try:
                self.call("Target.closeTarget", {"targetId": target})
            except BrowserError:
                pass

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
    problems: list = field(default_factory=list)      # (page, kind, detail)

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        lines = [f"{page}: {kind}: {detail}" for page, kind, detail in self.problems]
        lines.append(f"browser check: {self.pages} pages, {len(self.problems)} problems")
        return "\n".join(lines)


_IDS: dict[Path, set] = {}


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


def check_page(browser: Browser, page: Path, root: Path) -> list:
    rel = str(page.relative_to(root))
    problems = []
    info = browser.inspect(page.resolve().as_uri())
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
    return problems


def pages_of(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.html")
                  if not {"_static", "_sources", "_images"} & set(p.relative_to(root).parts))


def check_site(root, binary: str | None = None, log=print) -> Report:
    """Check every page under ``root``; raise FileNotFoundError if there is no site or no browser."""
    root = Path(root).resolve()
    if not (root / "index.html").exists():
        raise FileNotFoundError(f"no rendered book at {root} (run `make book` first)")
    binary = binary or find_chromium()
    if not binary:
        raise FileNotFoundError("no Chromium found (apt-get install chromium, or set $CHROMIUM)")
    report = Report()
    _IDS.clear()
    with Browser(binary) as browser:
        for page in pages_of(root):
            found = check_page(browser, page, root)
            report.pages += 1
            report.problems += found
            if log:
                log(f"  {'ok ' if not found else 'BAD'} {page.relative_to(root)}")
    return report


def main(argv=None) -> int:
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("site", nargs="?", default="_build/html", help="the rendered book (default _build/html)")
    ap.add_argument("--require-browser", action="store_true",
                    help="fail instead of skipping when no Chromium is installed")
    ap.add_argument("-q", "--quiet", action="store_true", help="print problems and the summary only")
    args = ap.parse_args(argv)
    binary = find_chromium()
    if not binary:
        msg = ("browser check SKIPPED: no Chromium on this machine (install Debian's `chromium` "
               "package, or set $CHROMIUM to a Chrome/Chromium binary)")
        print(msg)
        return 1 if args.require_browser else 0
    t0 = time.monotonic()
    try:
        report = check_site(args.site, binary, log=None if args.quiet else print)
    except (FileNotFoundError, BrowserError) as e:
        print(f"browser check FAILED: {e}")
        return 1
    print(report.summary() + f" ({time.monotonic() - t0:.0f} s, {Path(binary).name})")
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
