"""Hostile webhook bodies for every channel: hypothesis strategies, a byte encoder that can write what
``json.dumps`` cannot (raw invalid UTF-8, 5,000-deep nesting, 5,000-digit integers), and the two ways a
real-shaped kit delivery is made hostile (:func:`sprinkle` adds, :func:`mutate` replaces).

Used by ``tests/channels/test_hostile_input.py`` (a fixed, derandomized run through the ``ci``
hypothesis profile) and by ``loadtests/hostile_webhooks.py`` (a longer, random run).
"""

from __future__ import annotations

import copy
import json
import os
import random
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

__all__ = [
    "HOSTILE_STRINGS",
    "as_received",
    "RAW_TOKENS",
    "collect",
    "encode_hostile",
    "hostile_text",
    "junk",
    "mutate",
    "record_figures",
    "sprinkle",
]

# Markers a generated value may hold; encode_hostile() writes them out as bytes json.dumps cannot make.
_BAD_UTF8 = "\ue000bad-utf8\ue000"  # inside a string: replaced by bytes that are not UTF-8
_DEEP = "\ue000deep\ue000"  # a whole value: replaced by 5,000 nested arrays
_BIG_INT = "\ue000big-int\ue000"  # a whole value: a 5,000-digit integer literal
_HUGE_FLOAT = "\ue000huge-float\ue000"  # a whole value: 1e400 (past the double range)
RAW_TOKENS = (_DEEP, _BIG_INT, _HUGE_FLOAT)

HOSTILE_STRINGS = (
    "",
    " ",
    "\x00",
    "a\x00b",
    "\ud800",
    "x\udfffy",
    "²",
    "٣",
    "9" * 5000,
    "1" * 40,
    "US." + "1" * 300,
    "👩‍👩‍👧" * 50,
    "🇪🇸",
    "e\u0301" * 10,
    "\u202egnp.exe",
    "<script>alert(1)</script>",
    "'; DROP TABLE messages; --",
    _BAD_UTF8,
    "a" + _BAD_UTF8 + "b",
)
"""Strings that broke webhook handlers somewhere (bug reports of other projects, and the usual suspects)."""

hostile_text = st.one_of(
    st.text(st.characters(exclude_categories=()), max_size=60),  # surrogates and NUL included
    st.sampled_from(HOSTILE_STRINGS),
)
"""Any text, lone surrogates and NUL included, or one of :data:`HOSTILE_STRINGS`."""

_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    hostile_text,
    st.sampled_from(RAW_TOKENS),
)
junk = st.recursive(
    _leaves,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(hostile_text, children, max_size=4)
    ),
    max_leaves=12,
)
"""Any JSON-ish value, hostile leaves included."""


def encode_hostile(body: Any) -> bytes:
    """``body`` as JSON bytes (ASCII-escaped like Meta's, ``NaN``/``Infinity`` allowed), with the raw
    markers written out: invalid UTF-8 bytes, deep nesting, a huge integer, ``1e400``."""
    data = json.dumps(body, separators=(",", ":"), allow_nan=True).encode()
    for marker, raw in (
        (_DEEP, b"[" * 5000 + b"]" * 5000),
        (_BIG_INT, b"9" * 5000),
        (_HUGE_FLOAT, b"1e400"),
    ):
        data = data.replace(b'"' + json.dumps(marker).encode()[1:-1] + b'"', raw)
    return data.replace(json.dumps(_BAD_UTF8).encode()[1:-1], _BAD_BYTES)


_BAD_BYTES = b"\xff\xfe\xc3("
"""What :data:`_BAD_UTF8` is written as: bytes that are not UTF-8 (a lone continuation, a cut sequence)."""


def as_received(text: str) -> str:
    """``text`` as the service reads it after :func:`encode_hostile` (markers written as invalid
    UTF-8 come back as U+FFFD replacement characters), before any cleaning."""
    return text.replace(_BAD_UTF8, _BAD_BYTES.decode("utf-8", errors="replace"))


def sprinkle(body: Any, rng: random.Random, junk_values: list[Any]) -> Any:
    """A copy of ``body`` with junk *added*: an item inserted into each array, a ``x_hostile_N`` key into
    each object; nothing of the original is changed, so its valid messages stay valid."""
    out = copy.deepcopy(body)
    pool = iter(junk_values * 8)
    stack = [out]
    while stack:
        node = stack.pop()
        children = list(node.values()) if isinstance(node, dict) else list(node)
        stack += [c for c in children if isinstance(c, (dict, list))]
        value = next(pool, None)
        if isinstance(node, list):
            node.insert(rng.randint(0, len(node)), value)
        else:
            node[f"x_hostile_{rng.randint(0, 999)}"] = value
    return out


def mutate(body: Any, rng: random.Random, junk_values: list[Any]) -> Any:
    """A copy of ``body`` with a few values (any depth, containers included) *replaced* by junk."""
    out = copy.deepcopy(body)
    slots: list[tuple[Any, Any]] = []
    stack = [out]
    while stack:
        node = stack.pop()
        pairs = list(node.items()) if isinstance(node, dict) else list(enumerate(node))
        for key, child in pairs:
            if key == "object":
                continue  # keep the channel's own object: the route's other checks are tested elsewhere
            slots.append((node, key))
            if isinstance(child, (dict, list)):
                stack.append(child)
    for value in junk_values:
        if slots:
            node, key = rng.choice(slots)
            node[key] = value
    return out


def collect(strategy: st.SearchStrategy[Any], *, max_examples: int | None = None) -> list[Any]:
    """Examples of ``strategy`` drawn the way the active hypothesis profile says (``ci``: derandomized,
    so the same every run). The async tests then post them (hypothesis cannot drive the test's loop)."""
    out: list[Any] = []
    options: dict[str, Any] = dict(
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
        database=None,
        deadline=None,
    )
    if max_examples is not None:
        options["max_examples"] = max_examples

    @settings(**options)
    @given(strategy)
    def draw(example: Any) -> None:
        out.append(example)

    if os.environ.get("HOSTILE_SEED"):  # loadtests/hostile_webhooks.py picks and prints it
        draw = hypothesis_seed(int(os.environ["HOSTILE_SEED"]))(draw)
    draw()
    return out


def record_figures(test: str, **figures: int) -> None:
    """Append one test's figures (requests, 5xx, dead letters...) as a JSON line to ``HOSTILE_FIGURES``
    when that is set (the load-test script reads them); a no-op otherwise."""
    path = os.environ.get("HOSTILE_FIGURES")
    if path:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"test": test, **figures}) + "\n")
