"""The offline stand-in model understands Spanish as it understands English and answers in the
customer's language: asking for a person hands over, an order is looked up, passages are quoted."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from switchboard.standins.offline_demo import customer_language
from switchboard.standins.offline_server import OFFLINE_MARKER, demo_reply

ESCALATE = {"type": "function", "function": {"name": "escalate_to_human", "parameters": {"type": "object"}}}
SEARCH = {"type": "function", "function": {"name": "search_knowledge_base", "parameters": {"type": "object"}}}
ORDER = {"type": "function", "function": {"name": "check_order_status", "parameters": {"type": "object"}}}


@pytest.mark.parametrize(
    "text",
    ["Quiero hablar con una persona", "¿Me pasa con un agente, por favor?", "Necesito un asesor humano"],
)
def test_asking_for_a_person_in_spanish_hands_over(text):
    answer = demo_reply([{"role": "user", "content": text}], [SEARCH, ESCALATE])
    assert answer["tool_calls"] == [
        {"name": "escalate_to_human", "arguments": {"reason": "El cliente pidió hablar con una persona."}}
    ]


def _after(tool: str, question: str, result: str) -> list[dict]:
    call = {"id": "c1", "type": "function", "function": {"name": tool, "arguments": "{}"}}
    return [
        {"role": "user", "content": question},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": result},
    ]


def test_a_spanish_order_question_is_looked_up_and_answered_in_spanish():
    asked = demo_reply([{"role": "user", "content": "¿Dónde está mi pedido A-1004?"}], [SEARCH, ORDER])
    assert asked["tool_calls"] == [{"name": "check_order_status", "arguments": {"order_number": "A-1004"}}]
    status = {
        "found": True,
        "order_number": "A-1004",
        "status": "shipped",
        "carrier": "UPS",
        "tracking_number": "1Z9",
        "estimated_delivery": "2026-12-09T18:00:00Z",
    }
    content = demo_reply(
        _after("check_order_status", "¿Dónde está mi pedido A-1004?", json.dumps(status)), [ORDER]
    )
    assert content["content"] == (
        f"{OFFLINE_MARKER} El pedido A-1004 está enviado, con UPS (número de seguimiento 1Z9); "
        "entrega prevista el 2026-12-09."
    )


def test_passages_and_a_handover_are_said_in_the_customers_language():
    found = json.dumps({"results": [{"text": "Abrimos de 9 a 19."}]})
    spanish = demo_reply(_after("search_knowledge_base", "¿Cuál es su horario?", found), [SEARCH])["content"]
    assert spanish == (
        f'{OFFLINE_MARKER} Según nuestros documentos: "Abrimos de 9 a 19." (soy el modelo sustituto sin '
        "conexión y solo cito lo que devolvió la búsqueda)."
    )
    nothing = demo_reply(_after("search_knowledge_base", "¿Tienen garantía?", "[]"), [SEARCH])["content"]
    assert "no encontré nada" in nothing
    handed = demo_reply(_after("escalate_to_human", "Quiero una persona", "{}"), [ESCALATE])["content"]
    assert (
        handed
        == f"{OFFLINE_MARKER} He pasado su conversación a una persona de nuestro equipo; le atenderá aquí en breve."
    )
    english = demo_reply(_after("search_knowledge_base", "What are your hours?", found), [SEARCH])["content"]
    assert english.startswith(f'{OFFLINE_MARKER} From our documents: "Abrimos')


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("hola", "es"),
        ("Hi! Does it come in another color?", "en"),
        ("¿Tienen el ventilador en azul?", "es"),
        ("Where is my order A-1004?", "en"),
        ("Quiero devolver un producto", "es"),
        ("When do you open?", "en"),
    ],
)
def test_the_customers_language_is_recognised(text, language):
    assert customer_language(text) == language


ENGLISH = ["where", "is", "my", "order", "the", "fan", "blue", "hours", "can", "you", "help", "return", "it"]
SPANISH = [
    "dónde",
    "está",
    "mi",
    "pedido",
    "el",
    "ventilador",
    "azul",
    "horario",
    "puede",
    "ayuda",
    "devolver",
]


@given(st.lists(st.sampled_from(ENGLISH), min_size=1, max_size=12))
def test_english_words_read_as_english(words):
    assert customer_language(" ".join(words)) == "en" or not {
        "the",
        "is",
        "my",
        "where",
        "you",
        "can",
        "help",
        "it",
    } & set(words)


@given(st.lists(st.sampled_from(SPANISH), min_size=1, max_size=12), st.sampled_from(["¿", "¡", ""]))
def test_spanish_words_read_as_spanish(words, mark):
    text = mark + " ".join(words)
    assert customer_language(text) == "es" or not (
        {"dónde", "está", "mi", "el", "puede", "ayuda", "pedido"} & set(words) or mark
    )
