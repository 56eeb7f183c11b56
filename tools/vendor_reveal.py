#!/usr/bin/env python3
"""reveal.js for the offline slides: one pinned npm release, checked by its SHA-256, unpacked at build time.

    python tools/vendor_reveal.py _build/slides        # -> _build/slides/reveal.js/ (tools/slides.py calls this)

Nothing of reveal.js is committed. The first build fetches the release with ``npm pack`` (the npm
registry, npm's ordinary client; about 2.4 MB) into ``_build/vendor/``; every build checks the
tarball's SHA-256 against ``SHA256`` below and copies what a deck loads beside the decks:
``dist/reveal.js``, ``dist/reveal.css``, the ``white`` theme with its fonts, and the notes plugin
(``plugin/notes/notes.js``, the speaker view), about 2 MB. A deck then loads nothing from a network:
no jQuery, no require.js, no MathJax (no slide has math: ``slides.py`` says so if one ever does).

For a machine without npm or without the registry, fetch the tarball elsewhere
(``npm pack reveal.js@VERSION``) and pass it: ``python tools/slides.py --reveal-package FILE.tgz``.
"""
from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VERSION = "5.2.1"
SHA256 = "359b575dd51bbda32f89b2fd4c7dc46ad7389a805572158916c29252f7a27333"     # of reveal.js-5.2.1.tgz
CACHE = ROOT / "_build" / "vendor"
THEME = "white"                   # its fonts are in the package (the "simple" theme loads Google Fonts)
FILES = ("LICENSE", "dist/reveal.js", "dist/reveal.css", f"dist/theme/{THEME}.css", "plugin/notes/notes.js")
FOLDERS = ("dist/theme/fonts/source-sans-pro/",)                  # what white.css imports
FOLDER = "reveal.js"              # beside the decks: they load reveal.js/dist/reveal.js


class VendorError(RuntimeError):
    pass


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def tarball(package: Path | None = None, cache: Path = CACHE) -> Path:
    """The checked release tarball: ``package`` if given, else the cached one, else ``npm pack``'s."""
    if package is not None:
        path = Path(package)
        if not path.is_file():
            raise VendorError(f"--reveal-package {path}: no such file (give the .tgz of `npm pack reveal.js@{VERSION}`)")
    else:
        path = cache / f"reveal.js-{VERSION}.tgz"
        if not path.exists():
            npm = shutil.which("npm")
            if npm is None:
                raise VendorError(f"the slides need reveal.js {VERSION} and there is no npm to fetch it: install npm "
                                  f"(Debian: apt-get install npm), or fetch `npm pack reveal.js@{VERSION}` on another "
                                  f"machine and pass it with --reveal-package FILE.tgz")
            cache.mkdir(parents=True, exist_ok=True)
            try:
                r = subprocess.run([npm, "pack", f"reveal.js@{VERSION}", "--silent", "--pack-destination", str(cache)],
                                   cwd=cache, capture_output=True, text=True, timeout=300)
            except subprocess.TimeoutExpired:
                raise VendorError(f"npm pack reveal.js@{VERSION} timed out after 300 s (no registry?)") from None
            if r.returncode or not path.exists():
                tail = (r.stderr.strip().splitlines() or ["no message"])[-1]
                raise VendorError(f"npm pack reveal.js@{VERSION} failed ({tail}); without the registry, pass "
                                  f"--reveal-package FILE.tgz")
    digest = sha256(path)
    if digest != SHA256:
        raise VendorError(f"{path}: SHA-256 {digest}, not reveal.js {VERSION}'s {SHA256}; "
                          f"delete it (a partial download?) and build again")
    return path


def ensure(dest: Path, package: Path | None = None) -> Path:
    """``dest/reveal.js`` holding what the decks load, unpacked from the checked tarball (once)."""
    out = Path(dest) / FOLDER
    stamp = out / ".release"
    if stamp.exists() and stamp.read_text().strip() == f"{VERSION} {SHA256}" and \
            all((out / f).is_file() for f in FILES):
        return out
    tgz = tarball(package)
    if out.exists():
        shutil.rmtree(out)
    found = set()
    with tarfile.open(tgz, "r:gz") as tf:
        for member in tf.getmembers():
            name = member.name.removeprefix("package/")
            if not member.isfile() or not (name in FILES or name.startswith(FOLDERS)) or ".." in name:
                continue
            target = out / name
            target.parent.mkdir(parents=True, exist_ok=True)
            with tf.extractfile(member) as src, open(target, "wb") as dst:
                shutil.copyfileobj(src, dst)
            found.add(name)
    missing = [f for f in FILES if f not in found]
    if missing:
        raise VendorError(f"{tgz} lacks {', '.join(missing)}: not the reveal.js {VERSION} package")
    stamp.write_text(f"{VERSION} {SHA256}\n")
    return out


def main(argv=None) -> int:
    import argparse
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dest", type=Path, help="folder of the decks (reveal.js/ is made inside it)")
    ap.add_argument("--reveal-package", type=Path, help=f"the .tgz of `npm pack reveal.js@{VERSION}`")
    args = ap.parse_args(argv)
    try:
        print(ensure(args.dest, args.reveal_package))
    except VendorError as e:
        print(f"vendor_reveal: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
