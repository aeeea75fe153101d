"""CSS values of a mail's HTML as the hidden-text filter reads them: declarations, colours, lengths, contrast.

* Declarations: a ``style`` attribute parsed by tinycss2 (comments, escapes and ``!important`` as CSS
  defines them; an ``!important`` declaration beats a later ordinary one).
* Colours: every CSS Color 4 syntax tinycss2 parses (``#fff``, ``#ffffff80``, named colours,
  ``rgb()``/``rgba()`` with commas or spaces, ``hsl()``, ``hwb()``, ``lab()``, ``lch()``, ``oklab()``,
  ``oklch()``, ``color(srgb …)``, ``transparent``, ``currentcolor``), as sRGB with alpha; also system
  colours (``Canvas``, ``CanvasText``, ``WindowText``…, as a light colour scheme shows them),
  ``light-dark()`` (its light colour: mail opens in the light scheme unless it asks otherwise) and
  ``color-mix()`` (mixed in sRGB whatever space it names: close enough for contrast). Anything else
  (relative colours ``rgb(from …)``, colours of CSS Color 5 and later) is no colour here: the
  caller decides what an uncomputable colour means.
* Contrast: the WCAG 2.2 contrast ratio of two colours from their relative luminance
  (https://www.w3.org/TR/WCAG22/#dfn-contrast-ratio, https://www.w3.org/TR/WCAG22/#dfn-relative-luminance).
* Lengths: absolute units (px, pt, pc, in, cm, mm, Q), font-relative units (em, ex, ch, rem, …),
  percentages against a given base, viewport units against a 600 × 800 px mail window, and
  ``calc()`` / ``min()`` / ``max()`` / ``clamp()`` over those.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import tinycss2
import tinycss2.ast
import tinycss2.color4

__all__ = [
    "RGB",
    "RGBA",
    "SYSTEM_COLOURS",
    "Value",
    "blend",
    "contrast_ratio",
    "declarations",
    "length_px",
    "parse_colour",
    "relative_luminance",
]

RGB = tuple[float, float, float]
"""An sRGB colour, each channel 0..1."""
RGBA = tuple[float, float, float, float]
"""An sRGB colour with its alpha, each 0..1."""
Value = list[tinycss2.ast.Node]
"""A declaration's value: its component values without whitespace and comments."""

ROOT_FONT_PX = 16.0
"""The font size of the mail's root (``medium``), in px."""
VIEWPORT_PX = (600.0, 800.0)
"""Width and height (px) that viewport units (vw, vh, …) are measured against: a mail's reading pane."""
_ABSOLUTE_PX = {
    "px": 1.0,
    "pt": 96 / 72,
    "pc": 16.0,
    "in": 96.0,
    "cm": 96 / 2.54,
    "mm": 96 / 25.4,
    "q": 96 / 101.6,
}
_FONT_RELATIVE = {"em": 1.0, "ex": 0.5, "ch": 0.5, "cap": 0.7, "ic": 1.0, "lh": 1.2}
_ROOT_RELATIVE = {"rem": 1.0, "rex": 0.5, "rch": 0.5, "rcap": 0.7, "ric": 1.0, "rlh": 1.2}


def _viewport(unit: str) -> float | None:
    width, height = VIEWPORT_PX
    base = unit[1:] if unit[:1] in ("s", "l", "d") and unit[1:2] == "v" else unit
    return {
        "vw": width,
        "vi": width,
        "vh": height,
        "vb": height,
        "vmin": min(width, height),
        "vmax": max(width, height),
    }.get(base)


def _meaningful(nodes: Iterable[tinycss2.ast.Node]) -> Value:
    return [node for node in nodes if node.type not in ("whitespace", "comment")]


def declarations(style: str) -> dict[str, Value]:
    """The declarations of a ``style`` attribute, by lower-case property name.

    The last declaration of a property wins, unless an earlier one is ``!important`` and it is not.
    Text that is not CSS gives no declarations (never an error).
    """
    found: dict[str, Value] = {}
    important: set[str] = set()
    for node in tinycss2.parse_blocks_contents(style, skip_comments=True, skip_whitespace=True):
        if not isinstance(node, tinycss2.ast.Declaration):
            continue
        name = node.lower_name
        if name in important and not node.important:
            continue
        found[name] = _meaningful(node.value)
        if node.important:
            important.add(name)
    return found


def _gamma(channel: float) -> float:
    """Linear-light sRGB channel → sRGB-encoded (IEC 61966-2-1)."""
    channel = min(max(channel, 0.0), 1.0)
    return channel * 12.92 if channel <= 0.0031308 else 1.055 * channel ** (1 / 2.4) - 0.055


def _linear(channel: float) -> float:
    """sRGB-encoded channel → linear light (the formula WCAG's relative luminance uses)."""
    return channel / 12.92 if channel <= 0.04045 else ((channel + 0.055) / 1.055) ** 2.4


_XYZ_D65_TO_LINEAR_SRGB = (
    (3.2409699419045226, -1.537383177570094, -0.4986107602930034),
    (-0.9692436362808796, 1.8759675015077202, 0.04155505740717559),
    (0.05563007969699366, -0.20397695888897652, 1.0569715142428786),
)  # CSS Color 4, "Sample code for color conversions"
_D50_TO_D65 = (
    (0.955473421488075, -0.02309845494876471, 0.06325924320057072),
    (-0.0283697093338637, 1.0099953980813041, 0.021041441191917323),
    (0.012314014864481998, -0.020507649298898964, 1.330365926242124),
)  # Bradford chromatic adaptation, CSS Color 4


def _times(matrix: Sequence[Sequence[float]], vector: Sequence[float]) -> tuple[float, float, float]:
    x, y, z = (sum(m * v for m, v in zip(row, vector, strict=True)) for row in matrix)
    return x, y, z


def _srgb(colour: tinycss2.color4.Color) -> RGBA:
    space, alpha = colour.space, float(colour.alpha if colour.alpha is not None else 1.0)
    coordinates = tuple(float(c or 0.0) for c in colour.coordinates)
    if space in ("hsl", "hwb"):
        coordinates = tuple(float(c) for c in colour.to("srgb").coordinates)
    elif space in ("lab", "lch", "xyz-d50"):
        xyz = colour.to("xyz-d50").coordinates if space != "xyz-d50" else coordinates
        linear = _times(_XYZ_D65_TO_LINEAR_SRGB, _times(_D50_TO_D65, xyz))
        coordinates = tuple(_gamma(c) for c in linear)
    elif space in ("oklab", "oklch", "xyz-d65", "xyz"):
        xyz = colour.to("xyz-d65").coordinates if space in ("oklab", "oklch") else coordinates
        coordinates = tuple(_gamma(c) for c in _times(_XYZ_D65_TO_LINEAR_SRGB, xyz))
    elif space == "srgb-linear":
        coordinates = tuple(_gamma(c) for c in coordinates)
    # srgb as is; wide-gamut RGB spaces (display-p3, rec2020, …) read as sRGB: close enough for contrast
    red, green, blue = (min(max(c, 0.0), 1.0) for c in coordinates[:3])
    return red, green, blue, min(max(alpha, 0.0), 1.0)


_W, _K = (1.0, 1.0, 1.0, 1.0), (0.0, 0.0, 0.0, 1.0)
SYSTEM_COLOURS: dict[str, RGBA] = {
    "canvas": _W,
    "canvastext": _K,
    "window": _W,
    "windowtext": _K,
    "field": _W,
    "fieldtext": _K,
    "buttonface": (0.94, 0.94, 0.94, 1.0),
    "buttontext": _K,
    "buttonborder": (0.46, 0.46, 0.46, 1.0),
    "graytext": (0.43, 0.43, 0.43, 1.0),
    "highlight": (0.0, 0.47, 0.84, 1.0),
    "highlighttext": _W,
    "selecteditem": (0.0, 0.47, 0.84, 1.0),
    "selecteditemtext": _W,
    "linktext": (0.0, 0.0, 0.93, 1.0),
    "visitedtext": (0.33, 0.1, 0.55, 1.0),
    "activetext": (0.93, 0.0, 0.0, 1.0),
    "mark": (1.0, 1.0, 0.0, 1.0),
    "marktext": _K,
    "accentcolor": (0.0, 0.47, 0.84, 1.0),
    "accentcolortext": _W,
    "background": _W,
    "menu": _W,
    "menutext": _K,
    "infobackground": (1.0, 1.0, 0.88, 1.0),
    "infotext": _K,
    "captiontext": _K,
    "inactivecaptiontext": (0.43, 0.43, 0.43, 1.0),
    "appworkspace": _W,
}
"""System colours (CSS Color 4 and its deprecated ones) as a light colour scheme shows them."""


def _mix(function: tinycss2.ast.FunctionBlock, current: RGBA, depth: int) -> RGBA | None:
    """``color-mix(in <space>, c1 [p1], c2 [p2])`` mixed in sRGB (premultiplied, as CSS Color 5)."""
    parts: list[Value] = [[]]
    for node in function.arguments:
        if isinstance(node, tinycss2.ast.LiteralToken) and node.value == ",":
            parts.append([])
        elif node.type not in ("whitespace", "comment"):
            parts[-1].append(node)
    if len(parts) != 3:
        return None
    colours: list[RGBA] = []
    shares: list[float | None] = []
    for part in parts[1:]:
        percents = [n for n in part if isinstance(n, tinycss2.ast.PercentageToken)]
        rest = [n for n in part if not isinstance(n, tinycss2.ast.PercentageToken)]
        colour = parse_colour(rest, current, _depth=depth + 1) if len(percents) <= 1 else None
        if colour is None:
            return None
        colours.append(colour)
        shares.append(float(percents[0].value) / 100 if percents else None)
    first, second = shares
    if first is None and second is None:
        first = second = 0.5
    elif first is None:
        first = 1 - (second or 0.0)
    elif second is None:
        second = 1 - first
    total = (first or 0.0) + (second or 0.0)
    if total <= 0:
        return None
    weights = ((first or 0.0) / total, (second or 0.0) / total)
    alpha = sum(w * c[3] for w, c in zip(weights, colours, strict=True))
    if alpha <= 0:
        return 0.0, 0.0, 0.0, 0.0
    r, g, b = (sum(w * c[3] * c[i] for w, c in zip(weights, colours, strict=True)) / alpha for i in range(3))
    return r, g, b, alpha * min(total, 1.0)


def parse_colour(value: str | Sequence[tinycss2.ast.Node], current: RGBA, *, _depth: int = 0) -> RGBA | None:
    """A CSS colour (string or component values) as sRGB + alpha; ``currentcolor`` is ``current``.

    Returns ``None`` for anything that is not a colour this module computes (module docstring).
    """
    nodes = _meaningful(tinycss2.parse_component_value_list(value) if isinstance(value, str) else value)
    if len(nodes) != 1 or _depth > 8:
        return None
    node = nodes[0]
    if isinstance(node, tinycss2.ast.IdentToken) and node.lower_value in SYSTEM_COLOURS:
        return SYSTEM_COLOURS[node.lower_value]
    if isinstance(node, tinycss2.ast.FunctionBlock) and node.lower_name == "light-dark":
        light = []
        for part in node.arguments:
            if isinstance(part, tinycss2.ast.LiteralToken) and part.value == ",":
                break
            light.append(part)
        return parse_colour(light, current, _depth=_depth + 1)
    if isinstance(node, tinycss2.ast.FunctionBlock) and node.lower_name == "color-mix":
        return _mix(node, current, _depth)
    try:
        parsed = tinycss2.color4.parse_color(nodes[0])
    except (ValueError, TypeError, AttributeError, ZeroDivisionError, NotImplementedError):
        return None
    if parsed is None:
        return None
    if parsed == "currentcolor":
        return current
    try:
        return _srgb(parsed)
    except (ValueError, TypeError, NotImplementedError):
        return None


def blend(colour: RGBA, backdrop: RGB) -> RGB:
    """``colour`` painted over the opaque ``backdrop`` (source-over compositing in sRGB, as browsers do)."""
    alpha = colour[3]
    r, g, b = (alpha * colour[i] + (1 - alpha) * backdrop[i] for i in range(3))
    return r, g, b


def relative_luminance(colour: RGB) -> float:
    """WCAG 2.2 relative luminance of an sRGB colour: 0 (black) .. 1 (white)."""
    red, green, blue = (_linear(channel) for channel in colour)
    return 0.2126 * red + 0.7152 * green + 0.0722 * blue


def contrast_ratio(first: RGB, second: RGB) -> float:
    """WCAG 2.2 contrast ratio of two opaque colours: 1 (identical) .. 21 (black on white)."""
    lighter, darker = sorted((relative_luminance(first), relative_luminance(second)), reverse=True)
    return (lighter + 0.05) / (darker + 0.05)


@dataclass(frozen=True)
class _Basis:
    font_px: float
    percent_of_px: float


def _unit_px(value: float, unit: str, basis: _Basis) -> float | None:
    if unit in _ABSOLUTE_PX:
        return value * _ABSOLUTE_PX[unit]
    if unit in _FONT_RELATIVE:
        return value * _FONT_RELATIVE[unit] * basis.font_px
    if unit in _ROOT_RELATIVE:
        return value * _ROOT_RELATIVE[unit] * ROOT_FONT_PX
    viewport = _viewport(unit)
    return value * viewport / 100 if viewport is not None else None


def _node_px(node: tinycss2.ast.Node, basis: _Basis) -> float | None:
    if isinstance(node, tinycss2.ast.DimensionToken):
        return _unit_px(float(node.value), node.lower_unit, basis)
    if isinstance(node, tinycss2.ast.PercentageToken):
        return float(node.value) * basis.percent_of_px / 100
    if isinstance(node, tinycss2.ast.NumberToken):
        return float(node.value)  # unitless: px, as mail clients in quirks mode read it
    if isinstance(node, tinycss2.ast.FunctionBlock):
        name = node.lower_name
        if name == "calc":
            return _calc(_meaningful(node.arguments), basis)
        if name in ("min", "max", "clamp"):
            parts = _split_commas(node.arguments)
            values = [_calc(part, basis) for part in parts]
            if not values or any(v is None for v in values):
                return None
            known = [v for v in values if v is not None]
            if name == "clamp" and len(known) == 3:
                return max(known[0], min(known[1], known[2]))
            return min(known) if name == "min" else max(known) if name == "max" else None
    if isinstance(node, tinycss2.ast.ParenthesesBlock):
        return _calc(_meaningful(node.content), basis)
    return None


def _split_commas(nodes: Iterable[tinycss2.ast.Node]) -> list[Value]:
    parts: list[Value] = [[]]
    for node in nodes:
        if isinstance(node, tinycss2.ast.LiteralToken) and node.value == ",":
            parts.append([])
        elif node.type not in ("whitespace", "comment"):
            parts[-1].append(node)
    return parts


def _calc(nodes: Value, basis: _Basis) -> float | None:
    """``a + b - c * d / e`` over lengths and numbers (products before sums), in px."""
    terms: list[float] = []
    signs: list[float] = []
    current: float | None = None
    pending: str | None = None
    sign = 1.0
    for node in nodes:
        if isinstance(node, tinycss2.ast.LiteralToken) and node.value in ("+", "-", "*", "/"):
            if node.value in ("+", "-"):
                if current is None:
                    return None
                terms.append(current)
                signs.append(sign)
                current, sign = None, (1.0 if node.value == "+" else -1.0)
            else:
                pending = node.value
            continue
        number = _node_px(node, basis)
        if number is None:
            return None
        if current is None:
            current = number
        elif pending == "*":
            current *= number
        elif pending == "/":
            if number == 0:
                return None
            current /= number
        else:
            return None
        pending = None
    if current is None:
        return None
    terms.append(current)
    signs.append(sign)
    total = sum(s * t for s, t in zip(signs, terms, strict=True))
    return total if math.isfinite(total) else None


def length_px(node: tinycss2.ast.Node | None, *, font_px: float, percent_of_px: float) -> float | None:
    """One length in px, or ``None`` when it is not one (``auto``, a keyword, an unknown unit).

    Args:
        font_px: the font size em and ex are relative to.
        percent_of_px: what 100 % is (the parent's font size for ``font-size``, the mail's width for a box).
    """
    if node is None:
        return None
    value = _node_px(node, _Basis(font_px=font_px, percent_of_px=percent_of_px))
    return value if value is not None and math.isfinite(value) else None
