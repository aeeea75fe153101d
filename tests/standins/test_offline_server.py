"""The offline model server: demo behaviour, embeddings, transcriptions, models, HTTP scripting."""

from __future__ import annotations

import io
import json
import wave

import httpx
import pytest
from switchboard.agent.prompt import fence_inbound
from switchboard.llm.lexical import LEXICAL_MODEL_NAME, lexical_embedding
from switchboard.standins.offline_server import (
    OFFLINE_DEMO_MODEL,
    OFFLINE_MARKER,
    SUMMARY_INSTRUCTION_MARKER,
    UNAVAILABLE_TRANSCRIPT,
    demo_reply,
)

from tests.utils.agent import unique_model

SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search_knowledge",
        "description": "Search the knowledge base",
        "parameters": {
            "type": "object",
            "properties": {"question": {"type": "string"}},
            "required": ["question"],
        },
    },
}
ESCALATE_TOOL = {
    "type": "function",
    "function": {"name": "escalate_to_human", "parameters": {"type": "object"}},
}


def test_a_gmail_message_is_searched_on_the_customers_text_not_the_prompts_wrapper_tags():
    mail = "Hi,\nwhat does shipping to <Canada> cost?\nThanks, Ana"
    fenced = fence_inbound([{"role": "user", "content": mail}])  # as the orchestrator sends a Gmail turn
    assert fenced[0]["content"].startswith("<customer_message>\n")
    answer = demo_reply([{"role": "system", "content": "You are Shop."}, *fenced], [SEARCH_TOOL])
    (call,) = answer["tool_calls"]
    assert call["arguments"] == {"question": mail}
    assert "customer_message" not in json.dumps(answer)


def test_demo_calls_the_search_tool_with_the_customers_words():
    answer = demo_reply([{"role": "user", "content": "What are your opening hours?"}], [SEARCH_TOOL])
    assert answer == {
        "tool_calls": [
            {"name": "search_knowledge", "arguments": {"question": "What are your opening hours?"}}
        ]
    }


def test_demo_quotes_the_best_passage_from_the_search_result():
    messages = [
        {"role": "user", "content": "opening hours?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "search_knowledge", "arguments": "{}"}}
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "c1",
            "content": json.dumps(
                {"results": [{"text": "We open 9-17 Mon-Fri."}, {"text": "Closed Sundays."}]}
            ),
        },
    ]
    content = demo_reply(messages, [SEARCH_TOOL])["content"]
    assert content.startswith(OFFLINE_MARKER)
    assert '"We open 9-17 Mon-Fri."' in content
    assert "Closed Sundays" not in content


def test_demo_says_when_the_search_found_nothing():
    messages = [
        {"role": "user", "content": "warranty?"},
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "search_knowledge", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "[]"},
    ]
    content = demo_reply(messages, [SEARCH_TOOL])["content"]
    assert content.startswith(OFFLINE_MARKER) and "found nothing" in content


def test_demo_escalates_when_the_customer_asks_for_a_person():
    answer = demo_reply(
        [{"role": "user", "content": "Can I speak to a real person?"}], [SEARCH_TOOL, ESCALATE_TOOL]
    )
    assert answer["tool_calls"][0]["name"] == "escalate_to_human"


def test_demo_without_tools_gives_an_honest_marked_stand_in_answer():
    content = demo_reply([{"role": "user", "content": "hello"}], None)["content"]
    assert content.startswith(OFFLINE_MARKER) and "stand-in" in content


def test_demo_answers_a_summary_request_with_the_customers_lines():
    messages = [
        {"role": "system", "content": f"{SUMMARY_INSTRUCTION_MARKER} into a summary"},
        {"role": "user", "content": "my order A-1 is late"},
        {"role": "assistant", "content": "sorry"},
        {"role": "user", "content": "it was due Monday"},
    ]
    content = demo_reply(messages, None)["content"]
    assert content == f"{OFFLINE_MARKER} Earlier the customer wrote: my order A-1 is late; it was due Monday"


async def test_embeddings_are_the_lexical_embedding(offline_model):
    _, url = offline_model
    async with httpx.AsyncClient(base_url=url) as client:
        response = await client.post(
            "/v1/embeddings", json={"model": "x", "input": ["red shoes", "blue hat"], "dimensions": 64}
        )
    body = response.json()
    assert body["model"] == LEXICAL_MODEL_NAME
    assert [item["embedding"] for item in body["data"]] == [
        lexical_embedding("red shoes", 64),
        lexical_embedding("blue hat", 64),
    ]


def _wav(frames: bytes) -> bytes:
    """A 16 kHz mono 16-bit PCM WAV of ``frames``."""
    buf = io.BytesIO()
    with wave.open(buf, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(16_000)
        out.writeframes(frames)
    return buf.getvalue()


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (b"Hello, I need help with my order", "Hello, I need help with my order"),
        (
            b"RIFF\x24\x00\x00\x00WAVEfmt \x10\x00"
            + b"\x00" * 20
            + b"SWITCHBOARD-TRANSCRIPT:Where is my parcel?\x00\x01\x02",
            "Where is my parcel?",
        ),
        (bytes(range(256)) * 4, UNAVAILABLE_TRANSCRIPT),
        (_wav(b"\x00\x00" * 16_000), ""),  # a second of silence: no words, as a real model hears it
        (_wav(b"\x00\x00" * 8_000 + b"\x01\x00" + b"\x00\x00" * 7_999), UNAVAILABLE_TRANSCRIPT),
    ],
    ids=["utf8-text", "wav-with-marker", "real-audio", "silent-wav", "wav-with-one-sound"],
)
async def test_transcriptions_are_deterministic_and_honest(offline_model, payload, expected):
    _, url = offline_model
    async with httpx.AsyncClient(base_url=url) as client:
        response = await client.post(
            "/v1/audio/transcriptions",
            files={"file": ("voice.ogg", payload, "audio/ogg")},
            data={"model": "whisper-1"},
        )
    assert response.status_code == 200
    assert response.json() == {"text": expected}


async def test_models_lists_the_demo_and_scripted_models(offline_model):
    state, url = offline_model
    model = unique_model()
    state.script(model)
    async with httpx.AsyncClient(base_url=url) as client:
        ids = {m["id"] for m in (await client.get("/v1/models")).json()["data"]}
    assert {OFFLINE_DEMO_MODEL, LEXICAL_MODEL_NAME, model} <= ids


async def test_control_endpoint_scripts_a_deployment_over_http(offline_model):
    _, url = offline_model
    model = unique_model()
    async with httpx.AsyncClient(base_url=url) as client:
        queued = await client.post(
            f"/control/{model}",
            json={
                "responses": [
                    {"kind": "error", "status": 503},
                    {"kind": "tool_calls", "tool_calls": [{"name": "t", "arguments": {"a": 1}}]},
                ]
            },
        )
        assert queued.json() == {"model": model, "queued": 2}
        first = await client.post(
            "/v1/chat/completions", json={"model": model, "messages": [{"role": "user", "content": "x"}]}
        )
        second = await client.post(
            "/v1/chat/completions", json={"model": model, "messages": [{"role": "user", "content": "x"}]}
        )
        seen = (await client.get(f"/control/{model}")).json()
    assert first.status_code == 503
    call = second.json()["choices"][0]["message"]["tool_calls"][0]
    assert (call["function"]["name"], json.loads(call["function"]["arguments"])) == ("t", {"a": 1})
    assert second.json()["choices"][0]["finish_reason"] == "tool_calls"
    assert len(seen["requests"]) == 2 and seen["queued"] == 0


def test_demo_describes_an_image_without_words_that_read_as_the_customers():
    """The worker's image-to-text request: a stand-in description, never an answer or a tool call, and
    nothing the next turn would take for a request for a person."""
    content = [
        {"type": "text", "text": "Describe this image for a customer-support agent."},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
    ]
    answer = demo_reply([{"role": "user", "content": content}], [SEARCH_TOOL, ESCALATE_TOOL])
    assert answer == {
        "content": f"{OFFLINE_MARKER} An image the offline stand-in model cannot see (a real "
        "provider's vision model describes it here)."
    }
    follow_up = demo_reply(
        [{"role": "user", "content": f"[image: {answer['content']}] my valve"}], [ESCALATE_TOOL]
    )
    assert "tool_calls" not in follow_up


ORDER_TOOL = {
    "type": "function",
    "function": {
        "name": "check_order_status",
        "parameters": {"type": "object", "properties": {"order_number": {"type": "string"}}},
    },
}


@pytest.mark.parametrize(
    ("text", "order_number"),
    [
        ("Where is my order A-1001?", "A-1001"),
        ("my order #12345 never came", "12345"),
        ("Order SO12345 status please", "SO12345"),
        ("Is the FVAM-2050-B in stock? I want to order one", None),  # a product code, not an order
        ("Where is A-1001?", None),  # no "order": the knowledge search as before
    ],
)
def test_demo_looks_up_an_order_the_customer_names(text: str, order_number: str | None) -> None:
    answer = demo_reply([{"role": "user", "content": text}], [SEARCH_TOOL, ORDER_TOOL])
    (call,) = answer["tool_calls"]
    if order_number is None:
        assert call["name"] == "search_knowledge"
    else:
        assert call == {"name": "check_order_status", "arguments": {"order_number": order_number}}


def test_demo_quotes_a_passage_without_its_markdown_bold() -> None:
    """WhatsApp bold is one ``*``: a document's ``**question**`` would show its asterisks to the customer."""
    messages = [
        {"role": "user", "content": "returns?"},
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "search_knowledge", "arguments": "{}"}}
            ],
        },
        {
            "role": "tool",
            "tool_call_id": "c1",
            "content": json.dumps([{"text": "**What is your returns policy?** Returns: within 30 days."}]),
        },
    ]
    content = demo_reply(messages, [SEARCH_TOOL])["content"]
    assert '"What is your returns policy? Returns: within 30 days."' in content and "*" not in content
