"""Text and JSON that Postgres (and the UTF-8 encoder of its driver) can store, whatever produced it: a
webhook body, a model's answer, a tool's result.

Postgres ``text`` and ``jsonb`` refuse ``U+0000``; a lone surrogate (``"\\ud800"`` is valid JSON, and
CPython decodes it to a lone surrogate; a model's output can hold one) cannot be encoded as UTF-8 at
all; ``jsonb`` refuses ``NaN`` and ``Infinity``. :func:`clean_text` and :func:`clean_tree` make any value
storable: NUL removed, each lone surrogate replaced by U+FFFD, non-finite floats as ``null``, nesting
capped at :data:`MAX_DEPTH`.
"""

from __future__ import annotations

import math
import re
from typing import Any

__all__ = ["MAX_DEPTH", "TOO_DEEP", "clean_text", "clean_tree"]

MAX_DEPTH = 64
"""Deepest nesting kept (containers inside containers); deeper values become :data:`TOO_DEEP`."""
TOO_DEEP = "[nested too deep]"
"""What a subtree deeper than :data:`MAX_DEPTH` is replaced with."""

_BAD_CHARS = re.compile("[\x00\ud800-\udfff]")


def clean_text(value: str) -> str:
    """``value`` without NUL and with each lone surrogate replaced by U+FFFD (a text Postgres stores)."""
    if not _BAD_CHARS.search(value):
        return value
    return _BAD_CHARS.sub(lambda m: "" if m.group() == "\x00" else "\ufffd", value)


def clean_tree(value: Any) -> Any:
    """A copy of parsed JSON with every string (keys too) cleaned by :func:`clean_text`, non-finite
    floats as ``None``, and subtrees deeper than :data:`MAX_DEPTH` replaced by :data:`TOO_DEEP`.

    Iterative, so a deep body never hits the recursion limit here.
    """

    def leaf(item: Any) -> Any:
        if isinstance(item, str):
            return clean_text(item)
        if isinstance(item, float) and not math.isfinite(item):
            return None
        return item

    if not isinstance(value, (dict, list)):
        return leaf(value)
    root: Any = {} if isinstance(value, dict) else []
    stack: list[tuple[Any, Any, int]] = [(value, root, 1)]
    while stack:
        source, target, depth = stack.pop()
        pairs = source.items() if isinstance(source, dict) else enumerate(source)
        for key, item in pairs:
            if isinstance(item, (dict, list)):
                if depth >= MAX_DEPTH:
                    copy: Any = TOO_DEEP
                else:
                    copy = {} if isinstance(item, dict) else []
                    stack.append((item, copy, depth + 1))
            else:
                copy = leaf(item)
            if isinstance(target, dict):
                target[clean_text(key) if isinstance(key, str) else key] = copy
            else:
                target.append(copy)
    return root
