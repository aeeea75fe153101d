"""Recursive character splitter: chunks of at most ``chunk_size`` characters with ``overlap``.

The method of LangChain's ``RecursiveCharacterTextSplitter``: cut the text at the coarsest
boundary that occurs in it (paragraph, then line, then sentence end, then word), merge the pieces
greedily up to ``chunk_size``, and start each next chunk with the trailing pieces of the previous
one, up to ``overlap`` characters. A piece still longer than ``chunk_size`` is split again at the
next finer boundary; a run with no boundary at all (a 3,000-character token) is cut hard.
Defaults: 1,000 / 200 (``KB_CHUNK_SIZE_CHARS`` / ``KB_CHUNK_OVERLAP_CHARS``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["split_text"]

_SENTENCE_END = re.compile(r"(?<=[.!?;:])\s+")
_SEPARATORS: tuple[str | re.Pattern[str], ...] = ("\n\n", "\n", _SENTENCE_END, " ")


def _split_keep(text: str, separator: str | re.Pattern[str]) -> list[str]:
    """Split ``text`` after each separator, keeping the separator at the end of the piece before it."""
    if isinstance(separator, str):
        parts = text.split(separator)
        pieces = [part + separator for part in parts[:-1]] + [parts[-1]]
    else:
        pieces, start = [], 0
        for match in separator.finditer(text):
            pieces.append(text[start : match.end()])
            start = match.end()
        pieces.append(text[start:])
    return [piece for piece in pieces if piece]


def _atoms(
    text: str, separators: Sequence[str | re.Pattern[str]], chunk_size: int, hard_size: int
) -> list[str]:
    """Cut ``text`` into pieces of at most ``chunk_size`` at the coarsest boundary available."""
    if len(text) <= chunk_size:
        return [text]
    for index, separator in enumerate(separators):
        pieces = _split_keep(text, separator)
        if len(pieces) > 1:
            finer = separators[index + 1 :]
            break
    else:  # no boundary at all: cut hard, leaving room for the overlap carried in front
        return [text[start : start + hard_size] for start in range(0, len(text), hard_size)]
    out: list[str] = []
    for piece in pieces:
        out.extend(_atoms(piece, finer, chunk_size, hard_size) if len(piece) > chunk_size else [piece])
    return out


_TAIL_BOUNDARIES = (re.compile(r"(?:\n|[.!?;:]\s)\s*"), re.compile(r"\s+"))


def _tail(text: str, max_chars: int) -> str:
    """The longest suffix of ``text`` of at most ``max_chars`` that starts at a sentence (else word) start."""
    if max_chars <= 0:
        return ""
    if len(text) <= max_chars:
        return text
    window = text[-max_chars - 1 :]  # one extra character to see a boundary right before the window
    for boundary in _TAIL_BOUNDARIES:
        match = boundary.search(window)
        if match is not None and match.end() < len(window):
            return window[match.end() :]
    return text[-max_chars:]


def _merge(pieces: Sequence[str], chunk_size: int, overlap: int) -> list[str]:
    """Greedily join pieces (each <= chunk_size) into chunks; each next chunk starts with the previous
    chunk's tail (at most ``overlap`` characters, starting at a sentence or word boundary)."""
    chunks: list[str] = []
    current = ""
    fresh = False  # does ``current`` hold text not yet emitted?
    for piece in pieces:
        if fresh and len(current) + len(piece) > chunk_size:
            chunks.append(current)
            current = _tail(current, min(overlap, chunk_size - len(piece)))
            fresh = False
        current += piece
        fresh = True
    if fresh:
        chunks.append(current)
    return chunks


def split_text(text: str, *, chunk_size: int = 1000, overlap: int = 200) -> list[str]:
    """Split ``text`` into chunks preferring paragraph, then line, sentence and word boundaries.

    Args:
        text: any text.
        chunk_size: longest chunk, in characters (before whitespace at the ends is stripped).
        overlap: at most this many characters of one chunk's end start the next chunk
            (whole pieces only, so the overlap begins at a boundary too).

    Returns:
        Non-empty chunks in order, each at most ``chunk_size`` characters, whitespace-stripped.

    Raises:
        ValueError: ``overlap >= chunk_size`` or ``chunk_size < 1``.
    """
    if chunk_size < 1 or overlap < 0 or overlap >= chunk_size:
        raise ValueError(f"need 0 <= overlap < chunk_size, got chunk_size={chunk_size}, overlap={overlap}")
    pieces = _atoms(text, _SEPARATORS, chunk_size, chunk_size - overlap)
    chunks = _merge(pieces, chunk_size, overlap)
    return [chunk.strip() for chunk in chunks if chunk.strip()]
