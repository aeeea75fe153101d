"""Recursive splitter: size bound, boundary preference (paragraph > sentence > word), overlap."""

from __future__ import annotations

import pytest
from switchboard.knowledge import split_text


def _overlap(previous: str, following: str) -> int:
    """Length of the longest end of ``previous`` that starts ``following``."""
    for size in range(min(len(previous), len(following)), 0, -1):
        if previous.endswith(following[:size]):
            return size
    return 0


def _sentences(count: int, prefix: str) -> list[str]:
    return [f"{prefix} sentence {i} talks about coffee grinders and water filters." for i in range(count)]


def test_short_text_is_one_chunk():
    assert split_text("Hello world.  ") == ["Hello world."]


def test_paragraph_boundaries_are_preferred():
    paragraphs = [" ".join(_sentences(4, f"P{n}")) for n in range(6)]  # ~250 chars each
    chunks = split_text("\n\n".join(paragraphs), chunk_size=1000, overlap=200)
    assert all(len(chunk) <= 1000 for chunk in chunks)
    for chunk in chunks:
        # every chunk ends at the end of a paragraph
        assert any(chunk.endswith(paragraph) for paragraph in paragraphs), chunk[-80:]


def test_sentence_boundaries_inside_a_long_paragraph_and_overlap():
    sentences = _sentences(60, "S")
    text = " ".join(sentences)  # one paragraph, ~3,600 chars
    chunks = split_text(text, chunk_size=1000, overlap=200)
    assert len(chunks) >= 4
    for previous, following in zip(chunks, chunks[1:], strict=False):
        assert len(previous) <= 1000
        assert previous.endswith(".")  # cut after a sentence
        overlap = _overlap(previous, following)
        assert 0 < overlap <= 200
        assert following.startswith("S sentence")  # the overlap starts at a sentence start
    # nothing lost: every sentence is in some chunk
    assert all(any(sentence in chunk for chunk in chunks) for sentence in sentences)


def test_words_then_hard_cut_when_there_is_no_better_boundary():
    words = " ".join(f"word{i:04d}" for i in range(400))  # no sentence ends, ~3,600 chars
    chunks = split_text(words, chunk_size=1000, overlap=200)
    for previous, following in zip(chunks, chunks[1:], strict=False):
        assert len(previous) <= 1000
        assert previous.split()[-1] in following.split()[:30]  # overlap starts at a word
        assert 0 < _overlap(previous, following) <= 200
    blob = "x" * 2500
    hard = split_text(blob, chunk_size=1000, overlap=200)
    assert [len(chunk) for chunk in hard] == [800, 1000, 1000, 300]
    assert "".join(chunk[200:] if i else chunk for i, chunk in enumerate(hard)) == blob


def test_settings_sizes_are_respected():
    text = " ".join(_sentences(30, "T"))
    chunks = split_text(text, chunk_size=300, overlap=50)
    assert all(len(chunk) <= 300 for chunk in chunks)
    assert all(0 < _overlap(a, b) <= 50 for a, b in zip(chunks, chunks[1:], strict=False))


def test_invalid_sizes_raise():
    with pytest.raises(ValueError, match="overlap"):
        split_text("abc", chunk_size=100, overlap=100)
