"""The offline embedding in its helper process: the same floats as in process, and a lost helper costs nothing."""

from __future__ import annotations

import random

from switchboard.llm import lexical_process
from switchboard.llm.lexical import lexical_embedding
from switchboard.llm.lexical_process import embed_lexical


def _texts() -> list[str]:
    rng = random.Random(8)
    words = ["valve", "PTFE", "FVAM-2050-B", "seal", "ça", "coûte", "x", "the", "ÀÉÎ", "3,50", "İstanbul"]
    texts = ["", "a", "tab\tand\nnewline", "Word " * 300]
    texts += [" ".join(rng.choice(words) for _ in range(rng.randint(1, 200))) for _ in range(60)]
    return texts


def test_the_helper_gives_the_in_process_vectors_to_the_last_bit():
    texts = _texts()
    vectors = embed_lexical(texts)
    assert (
        lexical_process._helper is not None and lexical_process._helper.process.poll() is None
    )  # it ran there
    assert vectors == [lexical_embedding(text) for text in texts]  # float equality: every bit
    assert embed_lexical(texts[:3], dims=64) == [lexical_embedding(text, 64) for text in texts[:3]]
    assert embed_lexical([]) == []


def test_a_dead_helper_is_replaced_and_its_request_embedded_in_process(capsys):
    texts = _texts()[:10]
    embed_lexical(["start it"])
    helper = lexical_process._helper
    assert helper is not None
    helper.process.kill()
    helper.process.wait()
    assert embed_lexical(texts) == [lexical_embedding(text) for text in texts]  # in process, same floats
    assert lexical_process._helper is None
    assert embed_lexical(texts) == [lexical_embedding(text) for text in texts]  # a new helper
    assert lexical_process._helper is not None and lexical_process._helper is not helper
