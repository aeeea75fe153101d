"""The offline model's demo behaviour: deterministic answers for ``make run`` without a provider key.

It is a stand-in, not a language model, and says so: every answer starts with :data:`OFFLINE_MARKER`.
See :func:`demo_reply` for the rules. It understands Spanish as it understands English (asking for a
person, naming an order) and answers in the customer's language (:func:`customer_language`).
"""

from __future__ import annotations

import json
import re
from typing import Any

from switchboard.llm.lexical import tokenize
from switchboard.standins.offline_guard import (
    GUARDRAIL_INSTRUCTION_MARKER,
    INTENT_INSTRUCTION_MARKER,
    heuristic_intent,
    heuristic_verdict,
)

__all__ = ["OFFLINE_MARKER", "SUMMARY_INSTRUCTION_MARKER", "customer_language", "demo_reply"]

OFFLINE_MARKER = "[offline model]"
"""Prefix of every demo answer, so nobody mistakes the stand-in for a real model."""
SUMMARY_INSTRUCTION_MARKER = "Summarize the earlier part of this customer conversation"
"""Start of the orchestrator's summarization prompt; the demo model answers it with a plain digest."""

_HUMAN_REQUEST_RE = re.compile(
    r"\b(human|person|people|agent|representative|someone real|real person|operator|staff|manager"
    r"|persona|personas|humano|humana|agente|asesor|asesora|representante|operador|operadora|alguien real"
    r"|encargado|encargada|gerente)\b",
    re.IGNORECASE,
)
_SEARCH_TOOL_RE = re.compile(r"search|knowledge|faq|lookup", re.IGNORECASE)
_ORDER_TOOL = "check_order_status"
_ORDER_NUMBER_RE = re.compile(r"(?<![\w-])(?:[A-Z]{1,4}-?\d{3,}|#\d{3,})(?![\w-])")
"""An order reference in the customer's words: ``A-1001``, ``SO12345``, ``#12345`` (upper-case letters;
a product code such as ``FVAM-2050-B`` is not one), looked for only when they say "order"."""
_ORDER_WORD_RE = re.compile(r"\b(order|pedido|orden|compra)", re.IGNORECASE)
_SPANISH_WORDS = frozenset(
    "hola gracias quiero necesito puedo pedido pedidos dónde donde cómo como qué que cuándo cuando está "
    "están es son el la los las un una mi mis su sus de del al por para con sin hay tienen tiene hablar "
    "persona favor buenos buenas días tardes noches envío horario tienda precio cuánto cuesta ayuda y o".split()
)
_ENGLISH_WORDS = frozenset(
    "hi hello thanks thank want need can could my your the is are a an of to for with where how what "
    "when order have has do does please help talk person store price shipping and or i you".split()
)


def customer_language(text: str) -> str:
    """``es`` when ``text`` reads as Spanish (its marks ¿ ¡ ñ, or more Spanish than English words), else
    ``en``: the language the demo model answers in."""
    if any(mark in text for mark in "¿¡ñÑ"):
        return "es"
    words = re.findall(r"[a-záéíóúüñ]+", text.lower())
    spanish = sum(word in _SPANISH_WORDS for word in words)
    english = sum(word in _ENGLISH_WORDS for word in words)
    return "es" if spanish > english else "en"


_WORDS: dict[str, dict[str, str]] = {
    "en": {
        "no_order": "I could not look that order up: {error}",
        "not_found": "I couldn't find order {number} for you. Please check the number; orders can only be "
        "looked up by the customer who placed them.",
        "order": "Order {number} is {status}",
        "carrier": ", with {carrier} (tracking number {tracking})",
        "eta": "; estimated delivery {date}",
        "that_order": "that order",
        "registered": "registered",
        "handed_over": "I've passed your conversation to a person from our team; they will take over here shortly.",
        "goodbye": "Thank you for writing to us. Goodbye!",
        "quote": 'From our documents: "{passage}" (I am the offline stand-in model and only quote what the '
        "search returned.)",
        "nothing": "I searched our documents but found nothing about that. Would you like me to pass you to a person?",
        "ran": "I ran {names}; it returned: {result}",
        "a_tool": "a tool",
        "asked": "The customer asked for a person.",
        "stand_in": "Thanks for your message. I am the offline stand-in model, so I can't really answer that; "
        "once a real model provider is configured, a proper assistant will. If you need help now, ask for a person.",
    },
    "es": {
        "no_order": "No pude consultar ese pedido: {error}",
        "not_found": "No encontré el pedido {number}. Compruebe el número; solo quien hizo un pedido puede "
        "consultarlo.",
        "order": "El pedido {number} está {status}",
        "carrier": ", con {carrier} (número de seguimiento {tracking})",
        "eta": "; entrega prevista el {date}",
        "that_order": "ese pedido",
        "registered": "registrado",
        "handed_over": "He pasado su conversación a una persona de nuestro equipo; le atenderá aquí en breve.",
        "goodbye": "Gracias por escribirnos. ¡Hasta pronto!",
        "quote": 'Según nuestros documentos: "{passage}" (soy el modelo sustituto sin conexión y solo cito lo '
        "que devolvió la búsqueda).",
        "nothing": "Busqué en nuestros documentos pero no encontré nada sobre eso. ¿Quiere que le pase con una persona?",
        "ran": "Ejecuté {names}; devolvió: {result}",
        "a_tool": "una herramienta",
        "asked": "El cliente pidió hablar con una persona.",
        "stand_in": "Gracias por su mensaje. Soy el modelo sustituto sin conexión, así que no puedo responder "
        "a eso de verdad; cuando se configure un proveedor de modelos real, un asistente de verdad lo hará. "
        "Si necesita ayuda ahora, pida hablar con una persona.",
    },
}
"""The demo model's sentences in each language it answers in."""
_STATUS_ES = {
    "pending": "pendiente",
    "processing": "en preparación",
    "shipped": "enviado",
    "in_transit": "en camino",
    "out_for_delivery": "en reparto",
    "delivered": "entregado",
    "cancelled": "cancelado",
    "returned": "devuelto",
}


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


_BLOCK_RE = re.compile(r"<([a-z][a-z0-9_]*)>\n(.*)\n</\1>", re.DOTALL)
"""A whole message that is one data block of the prompt (:func:`switchboard.untrusted_text.untrusted_block`:
``<customer_message>\\n...\\n</customer_message>``, every ``<``/``>`` inside written ``&lt;``/``&gt;``)."""


def _customer_words(content: Any) -> str:
    """What the customer wrote in a ``user`` message: the text inside its data block when the prompt
    fenced it (an e-mail, :func:`switchboard.agent.prompt.fence_inbound`), unescaped, else the text.
    The search query, the guardrail's and intent's verdicts and the digest see the customer's words,
    not the prompt's wrapper tags."""
    text = _text_of(content)
    block = _BLOCK_RE.fullmatch(text.strip())
    if block is None:
        return text
    return block.group(2).replace("&lt;", "<").replace("&gt;", ">")


def _tool_names(tools: list[dict[str, Any]] | None) -> dict[str, dict[str, Any]]:
    return {t["function"]["name"]: t["function"] for t in tools or [] if t.get("type") == "function"}


def _query_argument(function: dict[str, Any], text: str) -> dict[str, Any]:
    """Arguments for a search tool: the customer's words in its first string parameter (``query`` if any)."""
    params = function.get("parameters") or {}
    props = params.get("properties") or {}
    if "query" in props or not props:
        return {"query": text}
    required = params.get("required") or list(props)
    for name in required:
        if (props.get(name) or {}).get("type") == "string":
            return {name: text}
    return {"query": text}


def _best_passage(result: str) -> str | None:
    """The best passage from a knowledge tool's result (JSON list/dict of hits, or plain text)."""
    try:
        data = json.loads(result)
    except (json.JSONDecodeError, TypeError):
        text = result.strip()
        return text or None
    if isinstance(data, dict):
        if "error" in data:
            return None
        for key in ("results", "hits", "chunks", "passages", "documents", "items"):
            if isinstance(data.get(key), list):
                data = data[key]
                break
    if isinstance(data, list):
        if not data:
            return None
        first = data[0]
        if isinstance(first, dict):
            for key in ("text", "content", "passage", "chunk", "snippet"):
                if isinstance(first.get(key), str) and first[key].strip():
                    return str(first[key]).strip()
            return json.dumps(first, ensure_ascii=False)
        return str(first)
    if isinstance(data, dict):
        for key in ("text", "content", "answer", "message"):
            if isinstance(data.get(key), str) and data[key].strip():
                return str(data[key]).strip()
    return str(data) if data else None


def _has_image(content: Any) -> bool:
    """Whether a ``user`` message carries an image part (OpenAI's ``{"type": "image_url", ...}``)."""
    return isinstance(content, list) and any(
        isinstance(part, dict) and part.get("type") == "image_url" for part in content
    )


_QUEUE_REPLY_RE = re.compile(r"Tell the customer, in their language: (.+)", re.DOTALL)


def _queue_reply(result: str) -> str | None:
    """The tenant's ``handoff.queue_reply`` that a queued ``escalate_to_human`` result asks the model to
    pass on (:func:`switchboard.agent.builtin_tools` ``status: queued_for_human``), else ``None``."""
    try:
        data = json.loads(result)
    except ValueError:
        return None
    if not isinstance(data, dict) or data.get("status") != "queued_for_human":
        return None
    found = _QUEUE_REPLY_RE.search(str(data.get("next") or ""))
    return found.group(1).strip() if found else None


def _order_sentence(result: str, language: str = "en") -> str:
    """One sentence from a ``check_order_status`` result (:class:`switchboard.tools.business.OrderStatus`
    JSON) in ``language``, or the tool's error as it came."""
    say = _WORDS[language]
    try:
        data = json.loads(result)
    except ValueError:
        return say["no_order"].format(error=_clip(result, 200))
    if not isinstance(data, dict) or "found" not in data:
        return say["no_order"].format(error=_clip(result, 200))
    number = data.get("order_number") or say["that_order"]
    if not data["found"]:
        return say["not_found"].format(number=number)
    status = str(data.get("status") or say["registered"])
    if language == "es":
        status = _STATUS_ES.get(status, status)
    sentence = say["order"].format(number=number, status=status)
    if data.get("carrier") and data.get("tracking_number"):
        sentence += say["carrier"].format(carrier=data["carrier"], tracking=data["tracking_number"])
    if data.get("estimated_delivery"):
        sentence += say["eta"].format(date=str(data["estimated_delivery"])[:10])
    return sentence + "."


def _clip(text: str, limit: int = 600) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def demo_reply(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> dict[str, Any]:
    """The demo model's deterministic answer: ``{"content": str}`` or ``{"tool_calls": [...]}``.

    Rules, in order:

    0. A guardrail request (system prompt starting with
       :data:`~switchboard.standins.offline_guard.GUARDRAIL_INSTRUCTION_MARKER`) gets the JSON of
       :func:`~switchboard.standins.offline_guard.heuristic_verdict` of the last user message; an intent
       classification (:data:`~switchboard.standins.offline_guard.INTENT_INSTRUCTION_MARKER`) the JSON of
       :func:`~switchboard.standins.offline_guard.heuristic_intent`.
    1. A summarization request (system prompt starting with :data:`SUMMARY_INSTRUCTION_MARKER`) gets
       a plain digest of the customer's lines.
    2. A description request (the last user message carries an image) → a stand-in description that
       says it saw nothing. After tool results (the messages after the last user message end with
       ``tool`` messages): an escalation result → "a person will take over", or the tenant's
       ``handoff.queue_reply`` the result passes on when nobody is online; a closed conversation → a
       farewell; a knowledge result → quote the best passage (or say nothing was found).
    3. The customer asks for a person/human/agent and ``escalate_to_human`` is offered → call it; the
       customer names an order (``A-1001``) and ``check_order_status`` is offered → call it (its result
       → one sentence: status, carrier and tracking, estimated delivery).
    4. A knowledge-search tool is offered (name contains search/knowledge/faq/lookup) → call it with
       the customer's words.
    5. Otherwise an honest stand-in answer.
    """
    system = _text_of(messages[0].get("content")) if messages and messages[0].get("role") == "system" else ""
    if system.startswith(GUARDRAIL_INSTRUCTION_MARKER):
        screened = next(
            (_customer_words(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), ""
        )
        return {"content": json.dumps(heuristic_verdict(screened))}
    if system.startswith(INTENT_INSTRUCTION_MARKER):
        asked = next(
            (_customer_words(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), ""
        )
        return {"content": json.dumps(heuristic_intent(asked))}
    if system.startswith(SUMMARY_INSTRUCTION_MARKER):
        lines = [
            _customer_words(m.get("content"))
            for m in messages[1:]
            if m.get("role") == "user" and m.get("content")
        ]
        digest = "; ".join(_clip(line, 80) for line in lines[-10:]) or "nothing of note"
        return {"content": f"{OFFLINE_MARKER} Earlier the customer wrote: {digest}"}

    last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=-1)
    if last_user >= 0 and _has_image(messages[last_user].get("content")):
        # a description request (the worker's image to text): describe, never answer or escalate, so
        # nothing in the description reads as the customer's own words ("ask for a person")
        return {
            "content": f"{OFFLINE_MARKER} An image the offline stand-in model cannot see (a real provider's "
            "vision model describes it here)."
        }
    customer_text = _customer_words(messages[last_user].get("content")).strip() if last_user >= 0 else ""
    after = messages[last_user + 1 :] if last_user >= 0 else []
    offered = _tool_names(tools)
    say = _WORDS[customer_language(customer_text)]

    if after and after[-1].get("role") == "tool":
        call_names = {
            call["id"]: call["function"]["name"]
            for m in after
            if m.get("role") == "assistant"
            for call in m.get("tool_calls") or []
        }
        results = [
            (call_names.get(m.get("tool_call_id"), ""), _text_of(m.get("content")))
            for m in after
            if m.get("role") == "tool"
        ]
        names = [name for name, _ in results]
        if "escalate_to_human" in names:
            queued = _queue_reply([result for name, result in results if name == "escalate_to_human"][-1])
            if queued:  # nobody online: the tool says what to tell the customer (``handoff.queue_reply``)
                return {"content": f"{OFFLINE_MARKER} {queued}"}
            return {"content": f"{OFFLINE_MARKER} {say['handed_over']}"}
        if _ORDER_TOOL in names:
            sentence = _order_sentence(results[names.index(_ORDER_TOOL)][1], customer_language(customer_text))
            return {"content": f"{OFFLINE_MARKER} {sentence}"}
        if "end_conversation" in names:
            return {"content": f"{OFFLINE_MARKER} {say['goodbye']}"}
        for name, result in reversed(results):
            if _SEARCH_TOOL_RE.search(name):
                passage = _best_passage(result)
                if passage:
                    # Markdown bold of the document would show as literal asterisks in a chat
                    quoted = say["quote"].format(passage=_clip(passage.replace("**", "")))
                    return {"content": f"{OFFLINE_MARKER} {quoted}"}
                return {"content": f"{OFFLINE_MARKER} {say['nothing']}"}
        ran = say["ran"].format(
            names=", ".join(n for n in names if n) or say["a_tool"], result=_clip(results[-1][1], 300)
        )
        return {"content": f"{OFFLINE_MARKER} {ran}"}

    if customer_text and _HUMAN_REQUEST_RE.search(customer_text) and "escalate_to_human" in offered:
        return {"tool_calls": [{"name": "escalate_to_human", "arguments": {"reason": say["asked"]}}]}
    order = (
        _ORDER_NUMBER_RE.search(customer_text)
        if _ORDER_TOOL in offered and _ORDER_WORD_RE.search(customer_text)
        else None
    )
    if order:
        return {
            "tool_calls": [{"name": _ORDER_TOOL, "arguments": {"order_number": order.group(0).lstrip("#")}}]
        }
    search = next((name for name in offered if _SEARCH_TOOL_RE.search(name)), None)
    if customer_text and search and tokenize(customer_text):
        return {
            "tool_calls": [{"name": search, "arguments": _query_argument(offered[search], customer_text)}]
        }
    return {"content": f"{OFFLINE_MARKER} {say['stand_in']}"}
