"""E-mail HTML → the plain text a model may read: hidden content removed first, then sanitised, then text.

Order matters (issue 12, "Untrusted content"):

1. :func:`remove_hidden` drops what a reader of the mail never sees but a model would: HTML comments,
   ``<script>``/``<style>``/``<head>``/``<template>``, elements with the ``hidden`` attribute or
   ``aria-hidden="true"``, and inline styles that hide (``display:none``, ``visibility:hidden``,
   ``opacity:0``, a font size under 2 px, zero height/width with ``overflow:hidden``, off-screen
   positions or text indents of 500 px and more, text coloured like its background or
   ``transparent``). It runs on lxml's tree **before** nh3, because nh3 drops the ``style``
   attributes these rules read.
2. nh3 (the Ammonia sanitiser) keeps only structural tags and no attributes.
3. inscriptis renders the rest as text with the layout of blocks, lists and tables.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import lxml.html
import nh3
from inscriptis import get_text
from lxml import etree

__all__ = ["CleanHtml", "html_to_text", "remove_hidden"]

_DROP_TAGS = ("script", "style", "head", "title", "template", "noscript", "object", "iframe", "svg")
_KEEP_TAGS = {
    "a", "b", "blockquote", "br", "caption", "code", "dd", "div", "dl", "dt", "em", "h1", "h2", "h3", "h4",
    "h5", "h6", "hr", "i", "li", "ol", "p", "pre", "s", "small", "span", "strong", "sub", "sup", "table",
    "tbody", "td", "tfoot", "th", "thead", "tr", "u", "ul",
}  # fmt: skip
MIN_VISIBLE_FONT_PX = 2.0
"""Text set smaller than this (in px; pt and em converted at 96 dpi / 16 px) is treated as hidden."""
OFFSCREEN_PX = 500.0
"""A negative position or text indent at least this large (px) puts text off-screen."""

_NAMED = {
    "white": "#ffffff", "black": "#000000", "red": "#ff0000", "green": "#008000", "blue": "#0000ff",
    "yellow": "#ffff00", "gray": "#808080", "grey": "#808080", "silver": "#c0c0c0", "navy": "#000080",
}  # fmt: skip
_LENGTH = re.compile(r"^(-?\d*\.?\d+)\s*(px|pt|em|rem|%)?$")


@dataclass(frozen=True)
class CleanHtml:
    """What :func:`html_to_text` made of a mail's HTML."""

    text: str
    hidden_text: str
    """The text that was removed as hidden (empty when nothing was hidden); never shown to a model."""


def _styles(element: etree._Element) -> dict[str, str]:
    style = element.get("style") or ""
    found: dict[str, str] = {}
    for declaration in style.split(";"):
        name, _, value = declaration.partition(":")
        if value:
            found[name.strip().lower()] = value.strip().lower().replace("!important", "").strip()
    return found


def _px(value: str) -> float | None:
    match = _LENGTH.match(value.strip())
    if not match:
        return None
    number, unit = float(match.group(1)), match.group(2) or "px"
    return {"px": number, "pt": number * 96 / 72, "em": number * 16, "rem": number * 16, "%": number * 0.16}[
        unit
    ]


def _color(value: str | None) -> str | None:
    if not value:
        return None
    value = value.strip().lower()
    if value in ("transparent",):
        return "transparent"
    if value in _NAMED:
        return _NAMED[value]
    if re.fullmatch(r"#[0-9a-f]{3}", value):
        return "#" + "".join(c * 2 for c in value[1:])
    if re.fullmatch(r"#[0-9a-f]{6}", value):
        return value
    rgb = re.fullmatch(r"rgba?\(\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*(?:,\s*([\d.]+)\s*)?\)", value)
    if rgb:
        if rgb.group(4) is not None and float(rgb.group(4)) == 0:
            return "transparent"
        return "#" + "".join(f"{min(int(rgb.group(i)), 255):02x}" for i in (1, 2, 3))
    return None


def _background(element: etree._Element) -> str | None:
    """The nearest declared background colour of ``element`` or an ancestor (default white)."""
    node: etree._Element | None = element
    while node is not None:
        styles = _styles(node)
        for key in ("background-color", "background"):
            if key in styles:
                first = styles[key].split()[0] if styles[key].split() else ""
                colour = _color(first)
                if colour and colour != "transparent":
                    return colour
        colour = _color(node.get("bgcolor"))
        if colour:
            return colour
        node = node.getparent()
    return "#ffffff"


def _is_hidden(element: etree._Element) -> bool:
    if element.get("hidden") is not None or (element.get("aria-hidden") or "").lower() == "true":
        return True
    styles = _styles(element)
    if styles.get("display") == "none" or styles.get("visibility") in ("hidden", "collapse"):
        return True
    if (opacity := styles.get("opacity")) is not None:
        try:
            if float(opacity) == 0:
                return True
        except ValueError:
            pass
    if (size := styles.get("font-size")) is not None:
        px = _px(size)
        if px is not None and px < MIN_VISIBLE_FONT_PX:
            return True
    if styles.get("overflow") == "hidden" or "overflow" not in styles:
        for key in ("height", "max-height", "width", "max-width"):
            px = _px(styles.get(key, "x"))
            if px is not None and px <= 0 and (styles.get("overflow") == "hidden" or key.startswith("max")):
                return True
    for key in ("left", "top", "text-indent", "margin-left", "right"):
        px = _px(styles.get(key, "x"))
        if px is not None and px <= -OFFSCREEN_PX:
            return True
    colour = _color(styles.get("color") or element.get("color"))
    if colour is not None and (colour == "transparent" or colour == _background(element)):
        return True
    return False


def remove_hidden(html: str) -> tuple[str, str]:
    """Remove hidden content (module docstring) from ``html``.

    Returns:
        ``(visible_html, hidden_text)``: the HTML without hidden parts, and the text that was removed
        (whitespace collapsed; comments included).
    """
    if not html.strip():
        return "", ""
    try:
        root = lxml.html.document_fromstring(html)
    except (etree.ParserError, ValueError):
        return "", ""
    hidden: list[str] = []
    for comment in list(root.iter(etree.Comment)):
        hidden.append(comment.text or "")
        parent = comment.getparent()
        if parent is not None:
            tail = comment.tail or ""
            previous = comment.getprevious()
            if previous is not None:
                previous.tail = (previous.tail or "") + tail
            else:
                parent.text = (parent.text or "") + tail
            parent.remove(comment)
    for element in list(root.iter(*_DROP_TAGS)):
        if element.getparent() is not None:
            if element.tag not in ("head", "title", "style"):
                hidden.append(element.text_content())
            element.drop_tree()
    for element in list(root.iter()):
        if not isinstance(element.tag, str) or element.getparent() is None:
            continue
        if _is_hidden(element):
            hidden.append(element.text_content())
            element.drop_tree()
    hidden_text = " ".join(" ".join(part.split()) for part in hidden if part and part.strip())
    return lxml.html.tostring(root, encoding="unicode"), hidden_text


def html_to_text(html: str) -> CleanHtml:
    """A mail's HTML as readable text (see the module docstring for the order of the steps)."""
    visible, hidden_text = remove_hidden(html)
    safe = nh3.clean(visible, tags=_KEEP_TAGS, attributes={}, strip_comments=True, link_rel=None)
    text = get_text(safe) if safe.strip() else ""
    lines = [line.rstrip() for line in text.replace("\xa0", " ").splitlines()]
    collapsed = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    return CleanHtml(text=collapsed, hidden_text=hidden_text)
