"""The offline lexical embedding: the counting rewrite gives the same vectors as summing as we go."""

from __future__ import annotations

import hashlib
import math
import random

from switchboard.llm.lexical import lexical_embedding, tokenize


def _reference(text: str, dims: int = 1536) -> list[float]:
    """The embedding as first written (every feature summed into a dict in reading order)."""
    features: dict[str, float] = {}
    previous = None
    for token in tokenize(text):
        features[f"w:{token}"] = features.get(f"w:{token}", 0.0) + 1.0
        if previous is not None:
            features[f"p:{previous} {token}"] = features.get(f"p:{previous} {token}", 0.0) + 0.5
        padded = f"#{token}#"
        for i in range(len(padded) - 2):
            trigram = f"c:{padded[i : i + 3]}"
            features[trigram] = features.get(trigram, 0.0) + 0.25
        previous = token
    vector = [0.0] * dims
    for feature, count in features.items():
        value = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest(), "little")
        sign = 1.0 if (value >> 63) & 1 else -1.0
        vector[value % dims] += sign * (1.0 + math.log(count)) if count >= 1 else sign * count
    norm = math.sqrt(sum(v * v for v in vector))
    return vector if norm == 0.0 else [v / norm for v in vector]


def test_vectors_are_the_reference_ones_to_the_last_bit():
    rng = random.Random(17)
    words = ["valve", "PTFE", "FVAM-2050-B", "seal", "ça", "coûte", "x", "a", "the", "ÀÉÎ", "ÿ", "3,50"]
    texts = ["", "a", "a a a a a", "Word " * 60, "İstanbul ß straße", "tab\tand\nnewline"]
    texts += [" ".join(rng.choice(words) for _ in range(rng.randint(1, 200))) for _ in range(150)]
    texts += ["".join(rng.choice("ab c-.é\n_9") for _ in range(rng.randint(0, 400))) for _ in range(150)]
    for text in texts:
        assert lexical_embedding(text) == _reference(text), text
        assert lexical_embedding(text, 64) == _reference(text, 64), text


def test_vectors_have_unit_norm_and_texts_without_words_are_zero():
    vector = lexical_embedding("The V200 valve has a PTFE seat.")
    assert len(vector) == 1536 and abs(math.sqrt(sum(v * v for v in vector)) - 1.0) < 1e-12
    assert lexical_embedding("... !!! ---") == [0.0] * 1536
