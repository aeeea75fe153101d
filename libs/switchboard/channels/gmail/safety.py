"""What a mail must never cause: an automatic reply to a machine, or the agent taking orders from it.

* :func:`automated_reason`: mail no person wrote, which gets no automatic reply (RFC 3834
  ``Auto-Submitted`` other than ``no``; ``Precedence: bulk | list | junk | auto_reply``; mailing
  lists and newsletters by ``List-Id`` / ``List-Unsubscribe`` (RFC 2369, 2919); vacation
  responders' ``X-Autoreply`` / ``X-Autorespond``; no-reply senders; bounces: ``multipart/report``,
  ``mailer-daemon@`` / ``postmaster@``, an empty ``Return-Path``).
* :func:`instruction_signals`: text that reads like instructions to an AI rather than a customer's
  request ("ignore previous instructions", "you are now...", a role marker) or text hidden in the
  HTML. Such a mail is still answered with read tools only; the conversation is flagged for review.
"""

from __future__ import annotations

import re

from switchboard.channels.gmail.mime import ParsedMail

__all__ = ["automated_reason", "instruction_signals", "is_no_reply_address"]

_NO_REPLY = re.compile(
    r"^(no[-_.]?reply|do[-_.]?not[-_.]?reply|noreply|bounces?|mailer[-_.]daemon|postmaster)([+._-].*)?$"
)
_PRECEDENCE = {"bulk", "list", "junk", "auto_reply"}
_INSTRUCTIONS = [
    re.compile(pattern, re.IGNORECASE)
    for pattern in (
        r"\b(ignore|disregard|forget|override)\b.{0,40}\b(previous|prior|above|earlier|all|your|the)\b.{0,20}"
        r"\b(instructions?|prompts?|rules|directions)\b",
        r"\byou are (now|no longer)\b",
        r"\b(system|developer)\s*(prompt|message|instructions?)\b",
        r"^\s*(system|assistant|developer)\s*:",
        r"<\s*/?\s*(system|instructions?|assistant)\s*>",
        r"\b(as an? (ai|language model|assistant))\b.{0,40}\b(you must|you should|do)\b",
        r"\b(call|use|invoke|run)\s+the\s+\w+\s+(tool|function)\b",
        r"\bnew instructions?\b",
        r"\b(ignora|olvida)\b.{0,40}\binstrucciones\b",
        r"\bignoriere\b.{0,40}\banweisungen\b",
    )
]


def is_no_reply_address(address: str | None) -> bool:
    """``no-reply@``, ``donotreply@``, ``mailer-daemon@``, ``bounce+x@``...: nobody reads replies there."""
    local = (address or "").split("@", 1)[0].lower()
    return bool(_NO_REPLY.match(local))


def automated_reason(mail: ParsedMail) -> str | None:
    """Why ``mail`` was sent by a machine (see the module docstring), or ``None`` for a person's mail."""
    headers = mail.headers
    auto_submitted = (headers.get("Auto-Submitted") or "").strip().lower()
    if auto_submitted and auto_submitted.split(";")[0].strip() != "no":
        return f"Auto-Submitted: {auto_submitted[:40]}"
    precedence = (headers.get("Precedence") or "").strip().lower()
    if precedence in _PRECEDENCE:
        return f"Precedence: {precedence}"
    for name in ("List-Id", "List-Unsubscribe"):
        if headers.get(name):
            return f"{name} (mailing list or newsletter)"
    for name in ("X-Autoreply", "X-Autorespond", "X-Auto-Response-Suppress"):
        value = (headers.get(name) or "").strip().lower()
        if value and (name != "X-Auto-Response-Suppress" or "oof" in value or "all" in value):
            return f"{name}: {value[:40]}"
    if mail.content_type.startswith("multipart/report"):
        return "delivery report (bounce)"
    if (headers.get("Return-Path") or "").strip() == "<>":
        return "empty Return-Path (bounce)"
    if is_no_reply_address(mail.sender_email):
        return f"no-reply sender {mail.sender_email}"
    return None


def instruction_signals(mail: ParsedMail) -> list[str]:
    """Review reasons for ``mail``: ``hidden_text`` when its HTML hid text, ``suspected_instructions``
    when what the reader sees (or what was hidden) reads like instructions to the agent."""
    signals: list[str] = []
    if mail.hidden_text.strip():
        signals.append("hidden_text")
    text = "\n".join((mail.subject, mail.full_text, mail.hidden_text))
    if any(pattern.search(line) for pattern in _INSTRUCTIONS for line in text.splitlines() or [text]):
        signals.append("suspected_instructions")
    return signals
