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
from collections import Counter

__all__ = ["LEXICAL_MODEL_NAME", "lexical_embedding", "tokenize"]

LEXICAL_MODEL_NAME = "switchboard-lexical-hash-v1"
"""Name recorded with embeddings made by this function (it is not an OpenAI model)."""

_TOKEN_RE = re.compile(r"[0-9a-zà-ÿ]+(?:[-_.][0-9a-zà-ÿ]+)*", re.IGNORECASE)


def tokenize(text: str) -> list[str]:
    """Lower-cased word tokens; codes such as ``FVAM-2050-B`` stay one token."""
    return [token.lower() for token in _TOKEN_RE.findall(text)]  # the pattern has no capturing group


_WEIGHTS = {"w": 1.0, "p": 0.5, "c": 0.25}
"""Weight of one occurrence of a feature, by its prefix: word, adjacent pair, trigram."""
_CACHE_MAX = 1 << 18
"""Features remembered per width (words and trigrams repeat across chunks; pairs less so)."""
_entries: dict[int, dict[str, tuple[int, float, float, float]]] = {}


def _entry(feature: str, dims: int) -> tuple[int, float, float, float]:
    """(bucket, sign, weight, value of a single occurrence) of one feature; cached per ``dims``."""
    cache = _entries.setdefault(dims, {})
    entry = cache.get(feature)
    if entry is None:
        digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
        value = int.from_bytes(digest, "little")
        sign = 1.0 if (value >> 63) & 1 else -1.0
        weight = _WEIGHTS[feature[0]]
        single = sign * (1.0 + math.log(weight)) if weight >= 1 else sign * weight
        if len(cache) >= _CACHE_MAX:  # a crude bound: start over rather than track recency
            cache.clear()
        entry = cache[feature] = (value % dims, sign, weight, single)
    return entry


@functools.lru_cache(maxsize=1 << 16)
def _token_features(token: str) -> tuple[str, tuple[str, ...]]:
    """The features one token contributes by itself: its word (weight 1.0) and its trigrams (0.25 each)."""
    padded = f"#{token}#"
    return f"w:{token}", tuple(f"c:{padded[i : i + 3]}" for i in range(len(padded) - 2))


def lexical_embedding(text: str, dims: int = 1536) -> list[float]:
    """Embed ``text`` into ``dims`` floats with unit L2 norm (all zeros for text without words).

    Features: each token (weight 1.0), each adjacent token pair (0.5), and the character trigrams
    of each token (0.25, so "colour"/"colors" still overlap). A feature seen ``n`` times weighs
    ``n x weight`` (exact in binary floating point: multiples of 0.25), scaled ``1 + ln(count)``
    from 1 up; features are added to their buckets in the order they first occur (word, pair,
    trigrams, token after token), so the vector is the same to the last bit as summing as we go.
    """
    feature_list: list[str] = []
    append, extend = feature_list.append, feature_list.extend
    previous = None
    for token in tokenize(text):
        word, trigrams = _token_features(token)
        append(word)
        if previous is not None:
            append(f"p:{previous} {token}")
        extend(trigrams)
        previous = token
    vector = [0.0] * dims
    log = math.log
    cache = _entries.get(dims)
    for feature, n in Counter(feature_list).items():  # Counter keeps first-occurrence order
        entry = cache.get(feature) if cache is not None else None
        if entry is None:
            entry = _entry(feature, dims)
            cache = _entries[dims]
        bucket, sign, weight, single = entry
        if n == 1:
            vector[bucket] += single
        else:
            count = n * weight
            vector[bucket] += sign * (1.0 + log(count)) if count >= 1 else sign * count
    norm = math.sqrt(sum([v * v for v in vector]))
    if norm == 0.0:
        return vector
    return [v / norm for v in vector]
