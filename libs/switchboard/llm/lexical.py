"""A deterministic lexical embedding (feature hashing) for running without any model provider.

This is not a semantic model: two texts are close when they share words, word pairs and
character trigrams of words. It lets ``make run`` and the tests ingest and search documents with
no API key and no downloaded weights. With a provider key, ``text-embedding-3-small`` is used.

Method: the "hashing trick" (Weinberger et al., 2009, "Feature Hashing for Large Scale Multitask
Learning"): each feature is hashed (BLAKE2b, stable across processes) to one of ``dims`` buckets
with a hashed sign, counts are log-scaled and the vector is L2-normalized, so cosine similarity
is a dot product.
"""

from __future__ import annotations

import functools
import hashlib
import math
import re

__all__ = ["LEXICAL_MODEL_NAME", "lexical_embedding", "tokenize"]

LEXICAL_MODEL_NAME = "switchboard-lexical-hash-v1"
"""Name recorded with embeddings made by this function (it is not an OpenAI model)."""

_TOKEN_RE = re.compile(r"[0-9a-zà-ÿ]+(?:[-_.][0-9a-zà-ÿ]+)*", re.IGNORECASE)


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens; codes such as ``FVAM-2050-B`` stay one token."""
    return [match.group(0).lower() for match in _TOKEN_RE.finditer(text)]


@functools.lru_cache(maxsize=1 << 18)
def _bucket(feature: str, dims: int) -> tuple[int, float]:
    """(bucket, sign) of one feature; cached: words and trigrams repeat across chunks."""
    digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
    value = int.from_bytes(digest, "little")
    return value % dims, (1.0 if (value >> 63) & 1 else -1.0)


@functools.lru_cache(maxsize=1 << 16)
def _token_features(token: str) -> tuple[str, ...]:
    """The features one token contributes by itself: its word (weight 1.0), then its trigrams (0.25 each)."""
    padded = f"#{token}#"
    return (f"w:{token}", *(f"c:{padded[i : i + 3]}" for i in range(len(padded) - 2)))


def lexical_embedding(text: str, dims: int = 1536) -> list[float]:
    """Embed ``text`` into ``dims`` floats with unit L2 norm (all zeros for text without words).

    Features: each token (weight 1.0), each adjacent token pair (0.5), and the character trigrams
    of each token (0.25, so "colour"/"colors" still overlap).
    """
    vector = [0.0] * dims
    tokens = tokenize(text)
    features: dict[str, float] = {}
    get = features.get
    previous = None
    for token in tokens:  # the same order as ever: the word, its pair, its trigrams (float sums)
        word, *trigrams = _token_features(token)
        features[word] = get(word, 0.0) + 1.0
        if previous is not None:
            pair = f"p:{previous} {token}"
            features[pair] = get(pair, 0.0) + 0.5
        for trigram in trigrams:
            features[trigram] = get(trigram, 0.0) + 0.25
        previous = token
    log = math.log
    for feature, count in features.items():
        bucket, sign = _bucket(feature, dims)
        vector[bucket] += sign * (1.0 + log(count)) if count >= 1 else sign * count
    norm = math.sqrt(sum(v * v for v in vector))
    if norm == 0.0:
        return vector
    return [v / norm for v in vector]
