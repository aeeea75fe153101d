"""Checks on model-written notes about a customer before they are stored and put back into a prompt.

The memory writer (:func:`switchboard.memory.store.summarize_into_memory`), the conversation summary
(:mod:`switchboard.agent.turns`) and the ``notes`` field of ``save_customer_profile`` all write text that
came, at least partly, from the customer and that a later turn reads in its system message. Wrapping it as
an :func:`~switchboard.untrusted_text.untrusted_block` stops it from posing as system text; these checks stop
a customer from turning their own words into a standing "fact" (OWASP LLM01, memory poisoning):

* no tags, no look-alike letters mixed into words, no instructions addressed to the assistant
  (``ignore your rules``, ``you must``, ``SYSTEM:``, ``from now on``...);
* provenance: a sentence about a commitment (a refund, a promise, a discount, an exemption, an
  approval...) is either the customer's claim (``The customer says ...``) or quotes, in double quotes,
  words that the assistant, a person from the team or a tool result actually wrote (``evidence``).
  Commitment words outside such a quote make the notes invalid: a model cannot launder "I was promised
  a refund" into "Was promised a refund".

The checks are deliberately strict: rejected notes keep what was stored before, which is always safe.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence

from switchboard.untrusted_text import TAG_LIKE_RE, normalize_untrusted

__all__ = ["NotesRejected", "check_notes", "check_customer_text", "evidence_from_notes", "CLAIM_RE"]


class NotesRejected(ValueError):
    """Notes that must not be stored. ``reason`` is a short code for logs: ``empty``, ``too_long``,
    ``tag``, ``lookalike``, ``instruction``, ``unsupported_commitment``; ``detail`` says where."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail


CLAIM_RE = re.compile(
    r"^(?:the\s+)?customer\s+(?:says|said|claims?|claimed|states?|stated|asks|asked|wants|wanted|reports?|"
    r"reported|believes|believed|mentions|mentioned|thinks|thought|requests|requested|insists|insisted|"
    r"expects|expected|writes|wrote|told\s+us)\b",
    re.IGNORECASE,
)
"""A sentence that is the customer's claim (``The customer says ...``): anything may follow."""
_COMMITMENT_RE = re.compile(
    r"promis|guarant|refund|reimburs|compensat|credit(?!\s*card)|discount|voucher|coupon|"
    r"free\s+of\s+charge|\bfor\s+free\b|waive|exempt|entitle|\bowe[ds]?\b|approv|authori[sz]|"
    r"exception|\bagreed\b|\bcommit|\bpermission|\bpermitted\b|\breplacement\b",
    re.IGNORECASE,
)
"""Words of a commitment: outside a claim, they may appear only inside a verified quote."""
_INSTRUCTION_RES = (
    re.compile(
        r"\b(?:ignore|disregard|forget|override|bypass|overrule)\b[^.\n]{0,60}"
        r"\b(?:instructions?|rules?|polic(?:y|ies)|prompts?|guidelines|guardrails|restrictions?|limits?)\b"
    ),
    re.compile(
        r"\b(?:you|assistant|the\s+ai|the\s+model|the\s+bot|chatbot)\s+(?:must|should|shall|have\s+to|has\s+to|"
        r"need\s+to|needs\s+to|are\s+to|is\s+to|will\s+now|can\s+now|may\s+now|are\s+now|is\s+now|"
        r"are\s+(?:allowed|permitted|authori[sz]ed|required))\b"
    ),
    re.compile(
        r"\b(?:from\s+now\s+on|new\s+(?:rules?|instructions?|polic(?:y|ies))|(?:system|developer)\s+"
        r"(?:prompt|message|instructions?|mode)|jailbreak|prompt\s+injection)\b"
    ),
    re.compile(r"^\W*(?:system|assistant|developer|user|tool)\s*:", re.MULTILINE),
    re.compile(
        r"(?:^|[.!?]\s+|\n\W*)(?:always|never|do\s+not|don't|ignore|disregard|skip|bypass|treat|pretend|act\s+as|"
        r"remember\s+that\s+you|make\s+sure\s+(?:you|to))\b",
        re.MULTILINE,
    ),
)
"""Instructions addressed to the assistant (checked on the case-folded text)."""
_QUOTE_RE = re.compile(r"\"([^\"\n]{1,600})\"")
_SENTENCE_END_RE = re.compile(r"(?<=[.!?;])\s+|\n+")
_BULLET_RE = re.compile(r"^[\s\-*•·\d.)]+")
_MIN_QUOTE_WORDS = 3
_CHECKED_SCRIPTS = frozenset({"LATIN", "CYRILLIC", "GREEK", "ARMENIAN", "CHEROKEE", "COPTIC"})
"""Scripts with letters that look like Latin ones: a word mixing two of them is a look-alike trick."""


_STRAIGHT_QUOTES = str.maketrans({"\u201c": '"', "\u201d": '"', "\u201e": '"', "\u2019": "'", "\u2018": "'"})


def _squash(text: str) -> str:
    """Case-folded, straight quotes, one space: how quotes are compared with their evidence."""
    text = normalize_untrusted(text).translate(_STRAIGHT_QUOTES).casefold()
    return re.sub(r"\s+", " ", text).strip()


def _mixed_script_word(text: str) -> str | None:
    for word in re.findall(r"\w+", text):
        scripts = {
            unicodedata.name(ch, "?").split()[0] for ch in word if ch.isalpha() and not ch.isascii()
        } | ({"LATIN"} if any(ch.isascii() and ch.isalpha() for ch in word) else set())
        if len(scripts & _CHECKED_SCRIPTS) > 1:
            return str(word)
    return None


def check_customer_text(text: str, *, max_chars: int) -> str:
    """Text from or about a customer that will be put in a prompt: no tags, look-alikes or instructions.

    Returns:
        :func:`~switchboard.untrusted_text.normalize_untrusted` ``text`` (what is stored).

    Raises:
        NotesRejected: ``empty``, ``too_long`` (over ``max_chars`` characters), ``tag``, ``lookalike``,
            ``instruction``.
    """
    normalized = normalize_untrusted(text)
    if not normalized:
        raise NotesRejected("empty")
    if len(normalized) > max_chars:
        raise NotesRejected("too_long", f"{len(normalized)} > {max_chars} characters")
    if tag := TAG_LIKE_RE.search(normalized):
        raise NotesRejected("tag", tag.group(0)[:80])
    if word := _mixed_script_word(normalized):
        raise NotesRejected("lookalike", word[:80])
    folded = normalized.translate(_STRAIGHT_QUOTES).casefold()
    for pattern in _INSTRUCTION_RES:
        if found := pattern.search(folded):
            raise NotesRejected("instruction", found.group(0).strip()[:80])
    return normalized


def check_notes(text: str, *, max_chars: int, evidence: Iterable[str] = ()) -> str:
    """Notes a model wrote about a customer, checked before they are stored.

    Args:
        text: the model's notes (plain text, one note per line).
        max_chars: the longest accepted text, in characters (e.g. the tenant's ``memory.max_chars``).
        evidence: what non-customers wrote and may be quoted for a commitment: the assistant's and the
            team's messages, tool results, and :func:`evidence_from_notes` of the notes stored before.

    Returns:
        The normalized notes (:func:`check_customer_text`).

    Raises:
        NotesRejected: as :func:`check_customer_text`, or ``unsupported_commitment``: a sentence with a
            commitment word that is neither the customer's claim nor inside a quote of ``evidence``
            (quotes of at least three words).
    """
    normalized = check_customer_text(text, max_chars=max_chars)
    said = [_squash(item) for item in evidence if item]
    for sentence in _sentences(normalized.translate(_STRAIGHT_QUOTES)):
        if CLAIM_RE.match(sentence) or not _COMMITMENT_RE.search(sentence):
            continue
        quotes = _QUOTE_RE.findall(sentence)
        outside = _QUOTE_RE.sub(" ", sentence)
        if _COMMITMENT_RE.search(outside) or not quotes:
            raise NotesRejected("unsupported_commitment", sentence[:120])
        for quote in quotes:
            wanted = _squash(quote).strip(" .,!?;:")
            if len(wanted.split()) < _MIN_QUOTE_WORDS or not any(wanted in item for item in said):
                raise NotesRejected("unsupported_commitment", f"quote not found: {quote[:100]}")
    return normalized


def evidence_from_notes(notes: str | None) -> list[str]:
    """The quotes of earlier, already checked notes that may be quoted again, so a merge can carry a
    verified commitment forward; quotes inside the customer's claims are left out, so an old claim never
    becomes a commitment (nor does an unquoted sentence of notes written before these checks)."""
    if not notes:
        return []
    return [
        quote
        for sentence in _sentences(normalize_untrusted(notes).translate(_STRAIGHT_QUOTES))
        if not CLAIM_RE.match(sentence)
        for quote in _QUOTE_RE.findall(sentence)
    ]


def _sentences(text: str) -> Sequence[str]:
    """Sentences (line breaks and ``. ! ? ;`` end one), bullets stripped; a quote never splits."""
    quotes: list[str] = []

    def hide(match: re.Match[str]) -> str:
        quotes.append(match.group(0))
        return f"\x00{len(quotes) - 1}\x00"

    hidden = _QUOTE_RE.sub(hide, text)
    out = []
    for part in _SENTENCE_END_RE.split(hidden):
        sentence = re.sub(r"\x00(\d+)\x00", lambda m: quotes[int(m.group(1))], part)
        sentence = _BULLET_RE.sub("", sentence).strip()
        if sentence:
            out.append(sentence)
    return out
