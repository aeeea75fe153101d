"""E-mail HTML → the plain text a model may read: hidden content removed first, then sanitised, then text.

Order matters:

1. :func:`remove_hidden` drops what a reader of the mail never sees but a model would. It works on
   the style each element ends up with, as a mail client computes it: the mail's ``<style>`` rules
   (``@media`` blocks included, print-only ones left out) are inlined into ``style`` attributes with
   css-inline (never loading a linked stylesheet), every declaration is read with tinycss2
   (custom properties and ``var()`` resolved), and colour, visibility, font size, opacity and scale
   are carried down the tree. Removed:

   * the words of HTML comments (Outlook's conditional markup and clipboard markers are no words),
     ``<script>``/``<style>``/``<head>``/``<template>``/``<noscript>``/``<iframe>``…;
   * elements with the ``hidden`` attribute or ``aria-hidden="true"``, ``display:none``,
     ``content-visibility:hidden``, ``filter: blur()`` of :data:`BLUR_PX` or more;
   * boxes that show nothing: ``max-height``/``max-width`` of 0, a width, height or line height
     under :data:`TINY_BOX_PX` with ``overflow`` hidden, ``clip: rect()`` of that size, a
     ``clip-path`` that leaves no area (or cannot be measured: ``url()``, ``path()``), anything
     moved :data:`OFFSCREEN_PX` or more off the top or left (``left``/``top``, margins, ``inset``,
     ``text-indent`` either way, ``translate``), or positioned that far by ``right``/``bottom``;
   * text that cannot be read: ``visibility:hidden`` (a child may set ``visible`` again), text
     smaller than :data:`MIN_VISIBLE_FONT_PX` once font size (any unit, ``font`` shorthand,
     ``calc()``), ``transform`` (``scale()``, ``matrix()``, ``skew()``, ``rotateX(90deg)``…),
     ``scale`` and ``zoom`` are applied (in the direction they squash most), and text whose colour
     contrasts less than :data:`MIN_CONTRAST` with the background it is painted on (WCAG 2.2
     contrast ratio; the nearest background colour or gradient of the element or an ancestor,
     white by default; alpha, ``opacity``, ``filter: opacity()`` and ``-webkit-text-fill-color``
     taken into account).

   It runs on lxml's tree **before** nh3, because nh3 drops the ``style`` attributes these rules read.
2. nh3 (the Ammonia sanitiser) keeps only structural tags and no attributes.
3. inscriptis renders the rest as text with the layout of blocks, lists and tables.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field

import css_inline
import lxml.html
import nh3
import tinycss2
import tinycss2.ast
from inscriptis import get_text
from lxml import etree

from switchboard.channels.gmail.style import (
    RGB,
    RGBA,
    VIEWPORT_PX,
    Value,
    blend,
    contrast_ratio,
    declarations,
    length_px,
    parse_colour,
)
from switchboard.observability import get_logger

__all__ = ["CleanHtml", "MIN_CONTRAST", "MIN_VISIBLE_FONT_PX", "html_to_text", "remove_hidden"]

log = get_logger(__name__)

_DROP_TAGS = (
    "script",
    "style",
    "head",
    "title",
    "template",
    "noscript",
    "object",
    "iframe",
    "svg",
    "link",
    "meta",
)
_SILENT_TAGS = ("head", "title", "style", "link", "meta")
"""Dropped without counting as hidden text (they hold no text a sender wrote for the reader)."""
_KEEP_TAGS = {
    "a",
    "b",
    "blockquote",
    "br",
    "caption",
    "code",
    "dd",
    "div",
    "dl",
    "dt",
    "em",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "hr",
    "i",
    "li",
    "ol",
    "p",
    "pre",
    "s",
    "small",
    "span",
    "strong",
    "sub",
    "sup",
    "table",
    "tbody",
    "td",
    "tfoot",
    "th",
    "thead",
    "tr",
    "u",
    "ul",
}
MIN_VISIBLE_FONT_PX = 4.0
"""Text rendered smaller than this (px, after transforms and zoom) cannot be read: it is hidden."""
MIN_CONTRAST = 1.5
"""Text whose WCAG 2.2 contrast ratio with its background is below this is hidden (1 = same colour;
``#fefefe`` on white is 1.01, ``#cccccc`` on white 1.6, black on white 21)."""
OFFSCREEN_PX = 500.0
"""Moved this far (px) off the top or left of the mail, text is off-screen."""
FAR_PX = 2000.0
"""A positioned element moved this far (px) right or down is past any mail window."""
BLUR_PX = 4.0
"""``filter: blur()`` of this radius (px) or more makes text unreadable."""
TINY_BOX_PX = 2.0
"""A box narrower or lower than this (px) that clips its overflow shows nothing."""
EXTREME_FILTER = 4.0
"""``filter: brightness()`` or ``contrast()`` beyond this factor (or below its inverse) washes text out
to white or black whatever its colour: the element is hidden."""
MIN_MASK_ALPHA = 0.1
"""A mask gradient whose every stop is less opaque than this shows nothing."""
_INHERITING = {"inherit", "unset", "revert", "revert-layer", "none", "auto"}
"""Keywords that leave a colour as the parent's (``initial`` is black); ``none`` and ``auto`` are no
colours, and a browser ignores such a declaration (mail HTML has them: ``background-color: none``)."""
_WHITE: RGB = (1.0, 1.0, 1.0)
_BLACK: RGBA = (0.0, 0.0, 0.0, 1.0)
_FONT_KEYWORDS_PX = {
    "xx-small": 9.0,
    "x-small": 10.0,
    "small": 13.0,
    "medium": 16.0,
    "large": 18.0,
    "x-large": 24.0,
    "xx-large": 32.0,
    "xxx-large": 48.0,
}
_CLIPPING = {"hidden", "clip", "scroll", "auto"}
_GROUPING_AT_RULES = {"media", "supports", "layer", "container", "document", "-moz-document"}
_LEADING_OFFSETS = (
    "left",
    "top",
    "margin-left",
    "margin-top",
    "text-indent",
    "inset-inline-start",
    "inset-block-start",
)
_TRAILING_OFFSETS = ("right", "bottom", "inset-inline-end", "inset-block-end")


@dataclass(frozen=True)
class CleanHtml:
    """What :func:`html_to_text` made of a mail's HTML."""

    text: str
    hidden_text: str
    """The text that was removed as hidden (empty when nothing was hidden); never shown to a model."""
    hidden_reasons: tuple[str, ...] = ()
    """Why parts were removed (``display:none``, ``low contrast``…), each once, in order found."""


@dataclass(frozen=True)
class _Paint:
    """What an element passes down: the inherited style and how its content reaches the screen."""

    colour: RGBA = _BLACK
    fill: RGBA | None = None
    """``-webkit-text-fill-color`` (paints the text instead of ``color`` when set)."""
    backdrop: RGB = _WHITE
    """The background this element's text is painted on, inside its opacity group."""
    group_scale: float = 1.0
    group_offset: RGB = (0.0, 0.0, 0.0)
    """Opacity groups as an affine map: on screen = ``group_scale`` × painted + ``group_offset``."""
    font_px: float = 16.0
    scale: float = 1.0
    """Product of the ``transform``/``scale``/``zoom`` factors of the element and its ancestors."""
    visible: bool = True
    variables: Mapping[str, str] = field(default_factory=dict)
    """Custom properties (``--name``) in scope, as CSS text."""

    def on_screen(self, colour: RGB) -> RGB:
        r, g, b = (self.group_scale * colour[i] + self.group_offset[i] for i in range(3))
        return r, g, b


@dataclass
class _Removed:
    parts: list[str] = field(default_factory=list)
    reasons: dict[str, None] = field(default_factory=dict)

    def add(self, text: str | None, reason: str) -> None:
        cleaned = _readable(text or "")
        if cleaned:
            self.parts.append(cleaned)
            self.reasons.setdefault(reason)


def _readable(text: str) -> str:
    """``text`` without invisible format characters (zero-width spaces, joiners), whitespace collapsed."""
    return " ".join("".join(c for c in text if unicodedata.category(c) != "Cf").split())


def _ident(value: Value | None) -> str | None:
    if value and isinstance(value[0], tinycss2.ast.IdentToken):
        return value[0].lower_value
    return None


def _number(node: tinycss2.ast.Node) -> float | None:
    if isinstance(node, tinycss2.ast.NumberToken):
        return float(node.value)
    if isinstance(node, tinycss2.ast.PercentageToken):
        return float(node.value) / 100
    return None


def _arguments(function: tinycss2.ast.FunctionBlock) -> list[Value]:
    parts: list[Value] = [[]]
    for node in function.arguments:
        if isinstance(node, tinycss2.ast.LiteralToken) and node.value == ",":
            parts.append([])
        elif node.type not in ("whitespace", "comment"):
            parts[-1].append(node)
    return [part for part in parts if part]


def _flat_arguments(function: tinycss2.ast.FunctionBlock) -> Value:
    return [node for part in _arguments(function) for node in part]


def _angle(node: tinycss2.ast.Node) -> float | None:
    """An angle in radians (``deg``, ``grad``, ``rad``, ``turn``, or a bare 0)."""
    if isinstance(node, tinycss2.ast.DimensionToken):
        per_turn = {"deg": 360.0, "grad": 400.0, "rad": 2 * math.pi, "turn": 1.0}.get(node.lower_unit)
        if per_turn is not None:
            return 2 * math.pi * float(node.value) / per_turn
    if isinstance(node, tinycss2.ast.NumberToken) and node.value == 0:
        return 0.0
    return None


def _font_px(found: dict[str, Value], parent_px: float) -> float:
    value = found.get("font-size")
    if value is None and "font" in found:
        shorthand = found["font"]
        for index, node in enumerate(shorthand):
            before_slash = index + 1 < len(shorthand) and getattr(shorthand[index + 1], "value", None) == "/"
            if (
                isinstance(node, tinycss2.ast.DimensionToken | tinycss2.ast.PercentageToken)
                or (isinstance(node, tinycss2.ast.IdentToken) and node.lower_value in _FONT_KEYWORDS_PX)
                or (isinstance(node, tinycss2.ast.NumberToken) and (before_slash or node.value == 0))
                or (
                    isinstance(node, tinycss2.ast.FunctionBlock)
                    and node.lower_name in ("calc", "min", "max", "clamp")
                )
            ):
                value = [node]
                break
    if not value:
        return parent_px
    keyword = _ident(value)
    if keyword is not None:
        if keyword in _FONT_KEYWORDS_PX:
            return _FONT_KEYWORDS_PX[keyword]
        return {"smaller": parent_px / 1.2, "larger": parent_px * 1.2, "initial": 16.0}.get(
            keyword, parent_px
        )
    px = length_px(value[0], font_px=parent_px, percent_of_px=parent_px)
    return max(px, 0.0) if px is not None else parent_px


def _smallest_scale(a: float, b: float, c: float, d: float) -> float:
    """The smallest singular value of the 2-D linear map ``[[a, c], [b, d]]``: how much it shrinks text
    in its most squashed direction."""
    total = a * a + b * b + c * c + d * d
    det = a * d - b * c
    return math.sqrt(max(total - math.sqrt(max(total * total - 4 * det * det, 0.0)), 0.0) / 2)


def _transform_scale(found: dict[str, Value], font_px: float) -> tuple[float, float]:
    """``(scale factor, most negative offset in px)`` of ``transform``, ``scale``, ``translate`` and ``zoom``.

    The factor is how much text shrinks in its most squashed direction (``scaleX(0.1)`` squashes
    glyphs to a tenth of their width: unreadable whatever their height).
    """
    factor, offset = 1.0, 0.0

    def length(node: tinycss2.ast.Node) -> float:
        return length_px(node, font_px=font_px, percent_of_px=VIEWPORT_PX[0]) or 0.0

    for node in found.get("transform") or []:
        if not isinstance(node, tinycss2.ast.FunctionBlock):
            continue
        name, arguments = node.lower_name, _flat_arguments(node)
        numbers = [n for n in (_number(a) for a in arguments) if n is not None]
        known = len(numbers) == len(arguments) and bool(numbers)
        if name in ("scale", "scale3d") and known:
            factor *= min(abs(numbers[0]), abs(numbers[1] if len(numbers) > 1 else numbers[0]))
        elif name in ("scalex", "scaley") and known:
            factor *= abs(numbers[0])
        elif name == "matrix" and known and len(numbers) == 6:
            factor *= _smallest_scale(*numbers[:4])
        elif name == "matrix3d" and known and len(numbers) == 16:
            factor *= _smallest_scale(numbers[0], numbers[1], numbers[4], numbers[5])
        elif name in ("rotatex", "rotatey") and arguments:
            angle = _angle(arguments[0])
            factor *= abs(math.cos(angle)) if angle is not None else 1.0
        elif name in ("skew", "skewx", "skewy") and arguments:
            angles = [_angle(a) for a in arguments[:2]]
            if None not in angles:
                first, second = (math.tan(a or 0.0) for a in [*angles, 0.0][:2])
                tan_x, tan_y = (second, first) if name == "skewy" else (first, second)
                factor *= _smallest_scale(1.0, tan_y, tan_x, 1.0)
        elif name in ("translate", "translatex", "translatey", "translate3d"):
            offset = min([offset, *(length(a) for a in arguments[:2])])
    scale = found.get("scale") or []
    if scale and _ident(scale) is None:
        numbers = [n for n in (_number(node) for node in scale) if n is not None]
        if numbers and len(numbers) == len(scale):
            factor *= min(abs(n) for n in numbers[:2])
    rotate = found.get("rotate") or []
    angles = [a for a in (_angle(node) for node in rotate) if a is not None]
    axis = [node for node in rotate if _angle(node) is None]
    if angles and axis:  # about x or y (or a vector in their plane): the text turns away from the reader
        keyword = _ident(axis)
        vector = [_number(node) for node in axis]
        if keyword in ("x", "y") or (len(vector) == 3 and vector[2] == 0 and None not in vector):
            factor *= abs(math.cos(angles[0]))
    for node in found.get("translate") or []:
        offset = min(offset, length(node))
    zoom = found.get("zoom")
    if zoom:
        number = _number(zoom[0])
        if number is not None and number >= 0:
            factor *= number
    return factor, offset


def _length(found: dict[str, Value], name: str, font_px: float) -> float | None:
    value = found.get(name)
    return length_px(value[0], font_px=font_px, percent_of_px=VIEWPORT_PX[0]) if value else None


def _sides(values: Value) -> list[tinycss2.ast.Node | None]:
    """A box shorthand of 1 to 4 values (``margin``, ``inset``) as ``[top, right, bottom, left]``."""
    v = values[:4]
    if not v:
        return [None, None, None, None]
    top, right = v[0], v[1] if len(v) > 1 else v[0]
    return [top, right, v[2] if len(v) > 2 else top, v[3] if len(v) > 3 else right]


def _offscreen(found: dict[str, Value], font_px: float, translate_px: float) -> bool:
    """Whether the element is moved out of the mail window (far up or left, or positioned far away)."""

    def px(node: tinycss2.ast.Node | None) -> float | None:
        return length_px(node, font_px=font_px, percent_of_px=VIEWPORT_PX[0]) if node is not None else None

    def first(name: str) -> tinycss2.ast.Node | None:
        return (found.get(name) or [None])[0]

    margin, inset = _sides(found.get("margin") or []), _sides(found.get("inset") or [])
    leading = [first(n) for n in _LEADING_OFFSETS] + [margin[0], margin[3], inset[0], inset[3]]
    trailing = [first(n) for n in _TRAILING_OFFSETS] + [inset[1], inset[2]]
    near = [o for o in (px(n) for n in leading) if o is not None] + [translate_px]
    if any(o <= -OFFSCREEN_PX for o in near):
        return True
    indent = px(first("text-indent"))
    if indent is not None and abs(indent) >= OFFSCREEN_PX:
        return True  # pushed past either edge of its line
    if _ident(found.get("position")) in ("absolute", "fixed"):
        if any(o is not None and abs(o) >= OFFSCREEN_PX for o in (px(n) for n in trailing)):
            return True  # right/bottom move it the other way: far either way leaves the window
        if any(o >= FAR_PX for o in near):
            return True
    return False


def _tiny_box(found: dict[str, Value], font_px: float) -> str | None:
    for name in ("max-height", "max-width"):
        size = _length(found, name, font_px)
        if size is not None and size <= 0:
            return f"{name}:0"
    overflow = {_ident(found.get(name)) for name in ("overflow", "overflow-x", "overflow-y")}
    if overflow & _CLIPPING:
        for name in ("height", "width", "max-height", "max-width"):
            size = _length(found, name, font_px)
            if size is not None and size < TINY_BOX_PX:
                return "tiny box with hidden overflow"
        line = found.get("line-height")
        if line and "height" not in found:
            size = length_px(line[0], font_px=font_px, percent_of_px=font_px)
            if size is not None and size <= 0:
                return "zero line height with hidden overflow"
    return None


def _clipped(found: dict[str, Value], font_px: float) -> str | None:
    clip = found.get("clip") or []
    if clip and isinstance(clip[0], tinycss2.ast.FunctionBlock) and clip[0].lower_name == "rect":
        edges = [
            None if _ident([n]) == "auto" else length_px(n, font_px=font_px, percent_of_px=0.0)
            for n in _flat_arguments(clip[0])
        ]
        if len(edges) == 4:
            top, right, bottom, left = edges
            height = (bottom if bottom is not None else math.inf) - (top or 0.0)
            width = (right if right is not None else math.inf) - (left or 0.0)
            if height < TINY_BOX_PX or width < TINY_BOX_PX:
                return "clip: rect()"
    path = found.get("clip-path") or []
    if not path or _ident(path) in ("none", "initial", "unset", "inherit", "revert"):
        return None
    if any(isinstance(n, tinycss2.ast.URLToken) for n in path):
        return "clip-path"  # a shape defined elsewhere cannot be measured: treated as clipping
    shape = next((n for n in path if isinstance(n, tinycss2.ast.FunctionBlock)), None)
    if shape is None:
        return None  # a box keyword alone (border-box…) clips nothing
    if not _shape_shows(shape, font_px):
        return "clip-path"
    return None


def _shape_shows(shape: tinycss2.ast.FunctionBlock, font_px: float) -> bool:
    """Whether a ``clip-path`` basic shape leaves an area (unknown shapes and ``url()``: no)."""
    name = shape.lower_name
    nodes = _flat_arguments(shape)
    if name == "inset":
        rounding = next((i for i, n in enumerate(nodes) if _ident([n]) == "round"), len(nodes))
        top, right, bottom, left = _sides(nodes[:rounding])
        if top is None:
            return True

        def share(node: tinycss2.ast.Node | None) -> float:
            if node is None:
                return 0.0
            if isinstance(node, tinycss2.ast.PercentageToken):
                return float(node.value)
            px = length_px(node, font_px=font_px, percent_of_px=100.0)
            return 100.0 * (px or 0.0) / (font_px * 1.2)  # against one line of text

        return share(top) + share(bottom) < 100 and share(left) + share(right) < 100
    if name in ("circle", "ellipse"):
        radii = []
        for node in nodes:
            if _ident([node]) == "at":
                break
            radii.append(node)
        for radius in radii:
            if _ident([radius]) in ("closest-side", "farthest-side"):
                continue
            size = length_px(radius, font_px=font_px, percent_of_px=font_px * 1.2)
            if size is not None and size < TINY_BOX_PX / 2:
                return False
        return True
    if name == "polygon":
        points = []
        for part in _arguments(shape):
            lengths = [
                length_px(n, font_px=font_px, percent_of_px=100.0) for n in part if _ident([n]) is None
            ]
            if len(lengths) >= 2 and None not in lengths[:2]:
                points.append((lengths[0] or 0.0, lengths[1] or 0.0))
        if len(points) < 3:
            return False
        area = abs(
            sum(x1 * y2 - x2 * y1 for (x1, y1), (x2, y2) in zip(points, points[1:] + points[:1], strict=True))
        )
        return area / 2 >= 1.0
    if name in ("rect", "xywh"):
        edges = [
            None if _ident([n]) == "auto" else length_px(n, font_px=font_px, percent_of_px=100.0)
            for n in nodes
            if _ident([n]) != "round"
        ][:4]
        if len(edges) < 4:
            return True
        if name == "xywh":
            return all(e is not None and e >= TINY_BOX_PX / 2 for e in edges[2:])
        top, right, bottom, left = edges
        height = (bottom if bottom is not None else math.inf) - (top or 0.0)
        width = (right if right is not None else math.inf) - (left or 0.0)
        return height >= TINY_BOX_PX / 2 and width >= TINY_BOX_PX / 2
    return False  # other shapes (path(), url()) cannot be measured: treated as clipping


def _masked(found: dict[str, Value]) -> str | None:
    """Why a ``mask`` / ``mask-image`` (``-webkit-`` ones too) shows nothing: a gradient whose every
    stop is (nearly) transparent, or an image that cannot be measured (``url()``, ``image()``…)."""
    for name in ("mask-image", "-webkit-mask-image", "mask", "-webkit-mask"):
        for node in found.get(name) or []:
            if isinstance(node, tinycss2.ast.URLToken):
                return "mask"
            if not isinstance(node, tinycss2.ast.FunctionBlock):
                continue
            if node.lower_name == "url" or not node.lower_name.endswith("gradient"):
                return "mask"
            stops = [parse_colour([n], _BLACK) for part in _arguments(node) for n in part[:1]]
            known = [stop for stop in stops if stop is not None]
            if known and all(stop[3] < MIN_MASK_ALPHA for stop in known):
                return "mask"
    return None


def _background(found: dict[str, Value], backdrop: RGB, current: RGBA) -> RGB:
    """The backdrop of an element's text: its own background colour (or a gradient's average colour)
    painted over ``backdrop``, its parent's; ``current`` is its ``currentcolor``."""
    layers = [*(found.get("background") or []), *(found.get("background-image") or [])]
    colour = parse_colour(found["background-color"], current) if found.get("background-color") else None
    if colour is None:
        colour = next((c for n in found.get("background") or [] if (c := parse_colour([n], current))), None)
    if colour is not None:
        backdrop = blend(colour, backdrop)
    for node in layers:
        if isinstance(node, tinycss2.ast.FunctionBlock) and node.lower_name.endswith("gradient"):
            stops = [c for part in _arguments(node) for n in part[:1] if (c := parse_colour([n], current))]
            if stops:
                average: RGBA = tuple(sum(s[i] for s in stops) / len(stops) for i in range(4))  # type: ignore[assignment]
                backdrop = blend(average, backdrop)
    return backdrop


def _spaced(value: Value) -> str:
    return " ".join(tinycss2.serialize([node]) for node in value)


def _substitute(text: str, variables: Mapping[str, str], depth: int = 0) -> str:
    """``text`` with every ``var(--name, fallback)`` replaced (nested ones too, at most 8 deep)."""
    out, index, lower = [], 0, text.lower()
    while (start := lower.find("var(", index)) >= 0:
        out.append(text[index:start])
        end, level = start + 4, 1
        while end < len(text) and level:
            level += {"(": 1, ")": -1}.get(text[end], 0)
            end += 1
        name, _, fallback = text[start + 4 : end - 1].partition(",")
        value = variables.get(name.strip().lower(), fallback)
        out.append(_substitute(value, variables, depth + 1) if depth < 8 else "")
        index = end
    out.append(text[index:])
    return "".join(out)


def _with_variables(value: Value, variables: Mapping[str, str]) -> Value:
    text = _spaced(value)
    if "var(" not in text.lower():
        return value
    return [
        n
        for n in tinycss2.parse_component_value_list(_substitute(text, variables))
        if n.type not in ("whitespace", "comment")
    ]


def _presentational(element: etree._Element, found: dict[str, Value]) -> None:
    """``<font color>`` and ``bgcolor``: hints a ``style`` declaration overrides."""
    for attribute, name in (("color", "color"), ("bgcolor", "background-color")):
        value = (element.get(attribute) or "").strip()
        if value and name not in found:
            if re.fullmatch(r"[0-9a-fA-F]{3}|[0-9a-fA-F]{6}", value):
                value = "#" + value  # legacy colour attributes accept hex without '#'
            found[name] = [n for n in tinycss2.parse_component_value_list(value) if n.type != "whitespace"]


def _computed(element: etree._Element, parent: _Paint) -> tuple[_Paint, str | None, str | None]:
    """``(what the element passes down, why the element is hidden, why its own text is hidden)``."""
    if element.get("hidden") is not None:
        return parent, "hidden attribute", None
    if (element.get("aria-hidden") or "").strip().lower() == "true":
        return parent, "aria-hidden", None
    found = declarations(element.get("style") or "")
    variables = parent.variables
    if any(name.startswith("--") for name in found):
        variables = {**variables, **{n: _spaced(v) for n, v in found.items() if n.startswith("--")}}
    found = {n: _with_variables(v, variables) for n, v in found.items() if not n.startswith("--")}
    _presentational(element, found)
    if _ident(found.get("display")) == "none":
        return parent, "display:none", None
    if _ident(found.get("content-visibility")) == "hidden":
        return parent, "content-visibility:hidden", None
    font_px = _font_px(found, parent.font_px)
    factor, translate_px = _transform_scale(found, font_px)
    if _offscreen(found, font_px, translate_px):
        return parent, "off-screen", None
    if (reason := _tiny_box(found, font_px) or _clipped(found, font_px)) is not None:
        return parent, reason, None
    opacity = 1.0
    if found.get("opacity"):
        number = _number(found["opacity"][0])
        opacity = min(max(number, 0.0), 1.0) if number is not None else 1.0
    for node in found.get("filter") or []:
        if isinstance(node, tinycss2.ast.FunctionBlock) and node.lower_name == "opacity":
            arguments = _flat_arguments(node)
            number = _number(arguments[0]) if arguments else None
            opacity *= min(max(number, 0.0), 1.0) if number is not None else 1.0
        elif isinstance(node, tinycss2.ast.FunctionBlock) and node.lower_name in ("brightness", "contrast"):
            arguments = _flat_arguments(node)
            number = _number(arguments[0]) if arguments else None
            if number is not None and not (1 / EXTREME_FILTER <= number <= EXTREME_FILTER):
                return parent, f"filter: {node.lower_name}()", None
        elif isinstance(node, tinycss2.ast.FunctionBlock) and node.lower_name == "blur":
            arguments = _flat_arguments(node)
            radius = length_px(arguments[0], font_px=font_px, percent_of_px=0.0) if arguments else None
            if radius is not None and radius >= BLUR_PX:
                return parent, "blurred", None
    if (reason := _masked(found)) is not None:
        return parent, reason, None
    group_scale, group_offset = parent.group_scale, parent.group_offset
    if opacity < 1.0:
        group_offset = tuple(
            parent.group_scale * (1 - opacity) * parent.backdrop[i] + parent.group_offset[i] for i in range(3)
        )  # type: ignore[assignment]
        group_scale = parent.group_scale * opacity
    uncomputable = None
    colour = parent.colour
    if found.get("color"):
        keyword = _ident(found["color"])
        if keyword == "initial":
            colour = _BLACK
        elif keyword not in _INHERITING:
            parsed = parse_colour(found["color"], parent.colour)
            uncomputable = uncomputable or (None if parsed is not None else "color")
            colour = parsed or parent.colour
    fill = parent.fill
    if found.get("-webkit-text-fill-color") and _ident(found["-webkit-text-fill-color"]) not in _INHERITING:
        parsed = parse_colour(found["-webkit-text-fill-color"], colour)
        uncomputable = uncomputable or (None if parsed is not None else "-webkit-text-fill-color")
        fill = parsed or fill
    if found.get("background-color") and _ident(found["background-color"]) not in _INHERITING:
        if parse_colour(found["background-color"], colour) is None:
            uncomputable = uncomputable or "background-color"
    visible = parent.visible
    visibility = _ident(found.get("visibility"))
    if visibility in ("hidden", "collapse"):
        visible = False
    elif visibility in ("visible", "initial"):
        visible = True
    paint = _Paint(
        colour=colour,
        fill=fill,
        backdrop=_background(found, parent.backdrop, colour),
        group_scale=group_scale,
        group_offset=group_offset,
        font_px=font_px,
        scale=parent.scale * factor,
        visible=visible,
        variables=variables,
    )
    if not visible:
        return paint, None, "visibility:hidden"
    if paint.font_px * paint.scale < MIN_VISIBLE_FONT_PX:
        return paint, None, "tiny text"
    if uncomputable is not None:
        return paint, None, f"{uncomputable} that cannot be computed"
    text = paint.on_screen(blend(fill or colour, paint.backdrop))
    if contrast_ratio(text, paint.on_screen(paint.backdrop)) < MIN_CONTRAST:
        return paint, None, "low contrast"
    return paint, None, None


def _is_print_only(prelude: list[tinycss2.ast.Node]) -> bool:
    return _is_print_only_text(tinycss2.serialize(prelude))


def _is_print_only_text(media: str) -> bool:
    """Whether a media query list applies to print or speech only (never to a screen)."""
    if not media.strip():
        return False
    queries = media.lower().split(",")
    return all(re.search(r"\b(print|speech)\b", q) and not re.search(r"\b(screen|all)\b", q) for q in queries)


def _selector_list(text: str) -> list[str]:
    """A selector list split at its top-level commas (not those inside ``:is(a, b)``)."""
    parts, depth, start = [], 0, 0
    for index, char in enumerate(text):
        if char in "([":
            depth += 1
        elif char in ")]":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    parts.append(text[start:])
    return [part.strip() for part in parts if part.strip()]


_MATCHES_ANY = re.compile(r":(?:is|where|matches|-webkit-any|-moz-any)\(", re.IGNORECASE)


def _expanded(selector: str, budget: int = 64) -> list[str]:
    """``selector`` without ``:is()`` / ``:where()`` (css-inline reads neither): ``p:is(.a, .b) span``
    becomes ``p.a span`` and ``p.b span``, nested ones too (at most ``budget`` selectors)."""
    match = _MATCHES_ANY.search(selector)
    if match is None:
        return [selector]
    depth, end = 1, match.end()
    while end < len(selector) and depth:
        depth += {"(": 1, ")": -1}.get(selector[end], 0)
        end += 1
    head, inner, tail = selector[: match.start()], selector[match.end() : end - 1], selector[end:]
    out: list[str] = []
    for option in _selector_list(inner):
        for variant in _expanded(head + option + tail, budget):
            if len(out) < budget:
                out.append(variant)
    return out


def _joined(parent: str, child: str) -> str:
    """A nested selector under its parent: ``&`` replaced by the parent, else a descendant of it."""
    return child.replace("&", parent) if "&" in child else f"{parent} {child}"


def _stylesheet(sources: list[str]) -> list[str]:
    """The rules of the mail's ``<style>`` elements as flat rules css-inline reads: grouping at-rules
    (``@media``…) unwrapped, ``@scope (root)`` rules put under their root (its limit ignored, which
    hides more, never less), nested rules put under their parent, ``:is()`` / ``:where()`` expanded."""
    rules: list[str] = []

    def emit(selectors: list[str], declarations_text: str) -> None:
        flat = [variant for selector in selectors for variant in _expanded(selector)]
        if flat and declarations_text.strip():
            rules.append(f"{', '.join(flat)} {{{declarations_text}}}")

    def qualified(rule: tinycss2.ast.QualifiedRule, parents: list[str] | None, depth: int) -> None:
        own = _selector_list(tinycss2.serialize(rule.prelude))
        selectors = [_joined(p, o) for p in parents for o in own] if parents else own
        body = tinycss2.parse_blocks_contents(rule.content, skip_comments=True, skip_whitespace=True)
        declared = [node for node in body if isinstance(node, tinycss2.ast.Declaration)]
        emit(selectors, ";".join(tinycss2.serialize([d]) for d in declared))
        if depth < 8:
            add(
                [node for node in body if not isinstance(node, tinycss2.ast.Declaration)],
                selectors,
                depth + 1,
            )

    def add(nodes: list[tinycss2.ast.Node], parents: list[str] | None = None, depth: int = 0) -> None:
        for rule in nodes:
            if isinstance(rule, tinycss2.ast.QualifiedRule):
                qualified(rule, parents, depth)
            elif isinstance(rule, tinycss2.ast.AtRule) and rule.content is not None:
                keyword = rule.lower_at_keyword
                if keyword == "media" and _is_print_only(rule.prelude):
                    continue
                inner = tinycss2.parse_blocks_contents(rule.content, skip_comments=True, skip_whitespace=True)
                if keyword == "scope":
                    root = next((n for n in rule.prelude if n.type == "() block"), None)
                    roots = _selector_list(tinycss2.serialize(root.content)) if root is not None else []
                    scoped = [f"{p} {r}" for p in parents for r in roots] if parents and roots else roots
                    add(inner, scoped or parents, depth + 1)
                elif keyword in _GROUPING_AT_RULES:
                    add(inner, parents, depth + 1)

    for source in sources:
        add(tinycss2.parse_stylesheet(source, skip_comments=True, skip_whitespace=True))
    return [rule.replace(":scope", ":root") for rule in rules]


def _inline(html: str, rules: list[str]) -> str:
    """``html`` with ``rules`` inlined into ``style`` attributes (cascade and specificity as CSS defines).

    Rules css-inline cannot read are left out (logged); linked stylesheets are never loaded.
    """

    def inliner(css: str) -> css_inline.CSSInliner:
        return css_inline.CSSInliner(
            inline_style_tags=False,
            keep_style_tags=False,
            keep_link_tags=False,
            load_remote_stylesheets=False,
            extra_css=css or None,
        )

    if not rules:
        return html
    try:
        return inliner("\n".join(rules)).inline(html)
    except Exception:  # noqa: BLE001 (one unreadable rule must not keep the others from applying)
        readable = []
        for rule in rules:
            try:
                inliner(rule).inline("<p></p>")
            except Exception:  # noqa: BLE001
                continue
            readable.append(rule)
        log.warning("mail_css_rules_skipped", skipped=len(rules) - len(readable), rules=len(rules))
        try:
            return inliner("\n".join(readable)).inline(html)
        except Exception:  # noqa: BLE001
            log.warning("mail_css_not_inlined", rules=len(rules))
            return html


def _comment_words(text: str) -> str:
    """The words of a comment: Outlook's conditional markup (``[if mso]><xml>…<![endif]``) and clipboard
    markers (``StartFragment``) are no words."""
    text = re.sub(r"\[if [^\]]*\]>?|<!\[endif\]|\[endif\]|<[^<>]*>", " ", text)
    return "" if text.strip() in ("StartFragment", "EndFragment") else text


def _prepare(root: etree._Element, removed: _Removed) -> list[str]:
    """Remove comments and non-content elements from ``root``; return the text of its ``<style>`` elements."""
    for comment in list(root.iter(etree.Comment, etree.ProcessingInstruction)):
        removed.add(_comment_words(comment.text or ""), "comment")
        parent = comment.getparent()
        if parent is not None:
            tail = comment.tail or ""
            previous = comment.getprevious()
            if previous is not None:
                previous.tail = (previous.tail or "") + tail
            else:
                parent.text = (parent.text or "") + tail
            parent.remove(comment)
    styles = [
        element.text or ""
        for element in root.iter("style")
        if not _is_print_only_text(element.get("media") or "")
    ]
    for element in list(root.iter(*_DROP_TAGS)):
        if element.getparent() is not None:
            if element.tag not in _SILENT_TAGS:
                removed.add(element.text_content(), f"<{element.tag}>")
            element.drop_tree()
    return styles


def _walk(root: etree._Element, removed: _Removed) -> None:
    """Drop hidden elements and clear hidden text in place, top-down with each element's computed style."""
    stack: list[tuple[etree._Element, _Paint, str | None]] = [(root, _Paint(), None)]
    while stack:
        element, parent, parent_hides_text = stack.pop()
        if parent_hides_text is not None and element.tail:
            removed.add(element.tail, parent_hides_text)
            element.tail = None
        if not isinstance(element.tag, str):
            continue
        paint, hidden, text_hidden = _computed(element, parent)
        if hidden is not None:
            removed.add(element.text_content(), hidden)
            if element.getparent() is None:
                element.clear()
            else:
                element.drop_tree()
            continue
        if text_hidden is not None and element.text:
            removed.add(element.text, text_hidden)
            element.text = None
        if element.tag == "details" and element.get("open") is None:
            _close_details(element, removed)
        stack.extend((child, paint, text_hidden) for child in reversed(element))


def _close_details(element: etree._Element, removed: _Removed) -> None:
    """A closed ``<details>`` shows its first ``<summary>`` only: the rest is hidden until opened."""
    summary = next((child for child in element if child.tag == "summary"), None)
    if element.text:
        removed.add(element.text, "closed <details>")
        element.text = None
    for child in list(element):
        if child is summary:
            continue
        if isinstance(child.tag, str):
            removed.add(child.text_content(), "closed <details>")
        if child.tail:
            removed.add(child.tail, "closed <details>")
        element.remove(child)
    if summary is not None and summary.tail:
        removed.add(summary.tail, "closed <details>")
        summary.tail = None


def remove_hidden(html: str) -> tuple[str, str]:
    """Remove hidden content (module docstring) from ``html``.

    Returns:
        ``(visible_html, hidden_text)``: the HTML without hidden parts, and the text that was removed
        (whitespace collapsed; comments included).
    """
    visible, removed = _remove_hidden(html)
    return visible, " ".join(removed.parts)


def _remove_hidden(html: str) -> tuple[str, _Removed]:
    removed = _Removed()
    if not html.strip():
        return "", removed
    try:
        root = lxml.html.document_fromstring(html)
    except (etree.ParserError, ValueError):
        return "", removed
    rules = _stylesheet(_prepare(root, removed))
    if rules:
        try:
            root = lxml.html.document_fromstring(_inline(lxml.html.tostring(root, encoding="unicode"), rules))
        except (etree.ParserError, ValueError):
            return "", removed
    _walk(root, removed)
    return lxml.html.tostring(root, encoding="unicode"), removed


def html_to_text(html: str) -> CleanHtml:
    """A mail's HTML as readable text (see the module docstring for the order of the steps)."""
    visible, removed = _remove_hidden(html)
    safe = nh3.clean(visible, tags=_KEEP_TAGS, attributes={}, strip_comments=True, link_rel=None)
    text = get_text(safe) if safe.strip() else ""
    lines = [line.rstrip() for line in text.replace("\xa0", " ").splitlines()]
    collapsed = re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
    return CleanHtml(
        text=collapsed, hidden_text=" ".join(removed.parts), hidden_reasons=tuple(removed.reasons)
    )
