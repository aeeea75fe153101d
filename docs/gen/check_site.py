"""Fail when the built site loads a script, stylesheet, font or image from another host.

Usage: ``python docs/gen/check_site.py site`` (``make docs`` runs it after ``mkdocs build``). The
site must work offline and tell no third party who reads it: every ``<script src>``, ``<link href>``
of a stylesheet, icon, font or preload, ``<img src>`` and CSS ``url(...)``/``@import`` must be on the
site itself. Links a reader clicks (``<a href>``) may go anywhere.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

_TAG = re.compile(r"<(script|link|img|iframe|source)\b[^>]*>", re.IGNORECASE)
_ATTR = re.compile(r"""\b(src|href)\s*=\s*["']([^"']*)["']""", re.IGNORECASE)
_CSS_URL = re.compile(r"""(?:url\(\s*["']?|@import\s+["'])([^"')\s]+)""", re.IGNORECASE)
_EXTERNAL = re.compile(r"^(?:[a-z][a-z0-9+.-]*:)?//", re.IGNORECASE)


def external_assets(text: str, *, css: bool = False) -> list[str]:
    """The external URLs (``http(s)://`` or protocol-relative ``//host``) that ``text`` loads as
    assets: from HTML tags, or with ``css=True`` from a stylesheet's ``url()`` and ``@import``."""
    found: list[str] = []
    if css:
        return [url for url in _CSS_URL.findall(text) if _EXTERNAL.match(url)]
    for tag in _TAG.finditer(text):
        for _, url in _ATTR.findall(tag.group(0)):
            if _EXTERNAL.match(url):
                found.append(url)
    for style in re.findall(r"<style\b[^>]*>(.*?)</style>", text, re.IGNORECASE | re.DOTALL):
        found += external_assets(style, css=True)
    return found


def check(site: Path) -> list[str]:
    """``"file: url"`` for every external asset under ``site`` (HTML pages and stylesheets)."""
    problems = []
    for path in sorted(site.rglob("*")):
        if path.suffix not in (".html", ".css"):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        problems += [
            f"{path.relative_to(site)}: {url}" for url in external_assets(text, css=path.suffix == ".css")
        ]
    return problems


def main(argv: list[str]) -> int:
    site = Path(argv[1] if len(argv) > 1 else "site")
    if not (site / "index.html").is_file():
        print(f"{site}/index.html not found: build the site first (make docs)", file=sys.stderr)
        return 2
    problems = check(site)
    for problem in problems:
        print(f"external asset: {problem}", file=sys.stderr)
    if problems:
        return 1
    print(f"{site}: no asset loaded from another host")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
