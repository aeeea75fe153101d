"""WhatsApp message templates: listed from the Graph sandbox (every page), stored per number, and
the values a sender gives checked against them."""

from __future__ import annotations

import random
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from switchboard.channels.whatsapp.send import GraphClient, GraphSendError
from switchboard.channels.whatsapp.templates import (
    TemplateRefused,
    TemplateValues,
    fill_template,
    find_template,
    list_templates,
    refresh_templates,
)
from switchboard.db.models import WhatsAppTemplate

from tests.utils.whatsapp import ACCESS_TOKEN


def new_waba_id() -> str:
    return str(random.randint(10**14, 10**15 - 1))


async def put_templates(base_url: str, waba_id: str, data: list[dict[str, Any]]) -> None:
    async with httpx.AsyncClient() as client:
        response = await client.put(f"{base_url}/_control/templates/{waba_id}", json={"data": data})
        response.raise_for_status()


def body_template(name: str, text: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "language": "en_US",
        "status": "APPROVED",
        "category": "UTILITY",
        "components": [{"type": "BODY", "text": text}],
        **extra,
    }


@pytest.fixture
async def graph(graph_sandbox):  # type: ignore[no-untyped-def]
    client = GraphClient(graph_sandbox[0], "v23.0")
    yield client
    await client.aclose()


async def test_refresh_reads_every_page_and_replaces_what_was_stored(
    wa_tenant, sessions, graph, graph_sandbox
) -> None:  # type: ignore[no-untyped-def]
    waba_id = new_waba_id()
    await put_templates(
        graph_sandbox[0], waba_id, [body_template(f"t{i:03}", "Hi {{1}}") for i in range(230)]
    )
    async with sessions() as session:
        rows = await refresh_templates(
            session, account=wa_tenant.account, waba_id=waba_id, graph=graph, token=ACCESS_TOKEN
        )
        await session.commit()
    assert [r.name for r in rows] == [f"t{i:03}" for i in range(230)]

    await put_templates(graph_sandbox[0], waba_id, [body_template("only_one", "Hello")])
    async with sessions() as session:  # no waba id: the one of the last refresh
        await refresh_templates(
            session, account=wa_tenant.account, waba_id=None, graph=graph, token=ACCESS_TOKEN
        )
        await session.commit()
        stored = await list_templates(session, tenant_id=wa_tenant.tenant.id)
    assert [(t.name, t.language, t.status, t.waba_id) for t in stored] == [
        ("only_one", "en_US", "APPROVED", waba_id)
    ]


async def test_the_sandbox_lists_the_sample_templates_by_default(wa_tenant, sessions, graph) -> None:  # type: ignore[no-untyped-def]
    async with sessions() as session:
        rows = await refresh_templates(
            session, account=wa_tenant.account, waba_id=new_waba_id(), graph=graph, token=ACCESS_TOKEN
        )
        await session.commit()
    assert [(r.name, r.language, r.status) for r in rows] == [
        ("hello_world", "en_US", "APPROVED"),
        ("order_update", "en_US", "APPROVED"),
        ("order_update", "es", "APPROVED"),
        ("shipping_label", "en_US", "APPROVED"),
        ("spring_sale", "en_US", "PENDING"),
    ]


async def test_refresh_without_a_business_account_id_says_so(wa_tenant, sessions, graph) -> None:  # type: ignore[no-untyped-def]
    async with sessions() as session:
        with pytest.raises(TemplateRefused) as refused:
            await refresh_templates(
                session, account=wa_tenant.account, waba_id=None, graph=graph, token=ACCESS_TOKEN
            )
    assert refused.value.code == "waba_id_required"
    assert str(refused.value) == "name the WhatsApp Business Account id (digits) the number belongs to"


async def test_a_refused_token_is_meta_s_error(wa_tenant, sessions, graph, graph_sandbox) -> None:  # type: ignore[no-untyped-def]
    graph_sandbox[1].token_errors["bad-token"] = 200
    async with sessions() as session:
        with pytest.raises(GraphSendError) as failed:
            await refresh_templates(
                session, account=wa_tenant.account, waba_id=new_waba_id(), graph=graph, token="bad-token"
            )
    assert (failed.value.code, failed.value.http_status) == (200, 403)


async def test_find_template_by_language(wa_tenant, sessions, graph) -> None:  # type: ignore[no-untyped-def]
    async with sessions() as session:
        await refresh_templates(
            session, account=wa_tenant.account, waba_id=new_waba_id(), graph=graph, token=ACCESS_TOKEN
        )
        await session.commit()
        assert (
            await find_template(session, account=wa_tenant.account, name="order_update", language="es")
        ).language == "es"
        assert (
            await find_template(session, account=wa_tenant.account, name="hello_world", language=None)
        ).language == "en_US"
        with pytest.raises(TemplateRefused, match=r"exists in several languages \['en_US', 'es'\]: name one"):
            await find_template(session, account=wa_tenant.account, name="order_update", language=None)
        with pytest.raises(TemplateRefused, match=r"exists in \['en_US', 'es'\], not in fr"):
            await find_template(session, account=wa_tenant.account, name="order_update", language="fr")
        with pytest.raises(TemplateRefused, match="no template nope on this number"):
            await find_template(session, account=wa_tenant.account, name="nope", language=None)


def template(
    components: list[dict[str, Any]], *, status: str = "APPROVED", fmt: str = "POSITIONAL"
) -> WhatsAppTemplate:
    return WhatsAppTemplate(
        name="t", language="en_US", status=status, parameter_format=fmt, components=components, waba_id="1"
    )  # type: ignore[call-arg]


ORDER = [
    {"type": "BODY", "text": "Hi {{1}}, your order {{2}} is {{3}}."},
    {
        "type": "BUTTONS",
        "buttons": [
            {"type": "QUICK_REPLY", "text": "Stop"},
            {"type": "URL", "text": "Track", "url": "https://shop.example.com/t/{{1}}"},
        ],
    },
]


def test_fill_positional_body_and_url_button() -> None:
    filled = fill_template(
        template(ORDER), TemplateValues(body=["Ana", "#1042", "on its way"], buttons=["1042"])
    )
    assert filled == {
        "name": "t",
        "language": "en_US",
        "components": [
            {
                "type": "body",
                "parameters": [
                    {"type": "text", "text": "Ana"},
                    {"type": "text", "text": "#1042"},
                    {"type": "text", "text": "on its way"},
                ],
            },
            {
                "type": "button",
                "sub_type": "url",
                "index": "1",
                "parameters": [{"type": "text", "text": "1042"}],
            },
        ],
    }


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            TemplateValues(body=["Ana", "#1042"], buttons=["1"]),
            r"template t takes 3 body value\(s\), 2 given",
        ),
        (
            TemplateValues(body=["Ana", "#1042", "late"]),
            r"template t takes 1 button value\(s\) \(the end of each link\), 0 given",
        ),
        (TemplateValues(body=["Ana", "", "late"], buttons=["1"]), "body value 2 is empty"),
        (TemplateValues(body=["Ana", "a\nb", "late"], buttons=["1"]), "body value 2 may not hold a new line"),
        (TemplateValues(body=["Ana", "a      b", "late"], buttons=["1"]), "more than four spaces in a row"),
        (TemplateValues(body={"1": "Ana"}, buttons=["1"]), "numbers its values"),
        (TemplateValues(body=["A", "B", "C"], header="x", buttons=["1"]), "template t has no header to fill"),
        (TemplateValues(body=["A", "B", "x" * 1100], buttons=["1"]), "longer than 1024 characters"),
    ],
)
def test_values_that_do_not_fit_are_refused_in_words(values: TemplateValues, message: str) -> None:
    with pytest.raises(TemplateRefused, match=message) as refused:
        fill_template(template(ORDER), values)
    assert refused.value.code == "template_parameters_invalid"


def test_a_pending_template_is_not_sent() -> None:
    with pytest.raises(
        TemplateRefused, match=r"template t \(en_US\) is pending, not approved by WhatsApp"
    ) as refused:
        fill_template(template(ORDER, status="PENDING"), TemplateValues(body=["a", "b", "c"], buttons=["1"]))
    assert refused.value.code == "template_not_approved"


def test_named_values_and_a_document_header() -> None:
    components = [
        {"type": "HEADER", "format": "DOCUMENT"},
        {"type": "BODY", "text": "Label of {{order_id}} for {{name}}, {{name}}."},
    ]
    named = template(components, fmt="NAMED")
    with pytest.raises(
        TemplateRefused, match="has a document header: give header_media with a link or a media id"
    ):
        fill_template(named, TemplateValues(body={"order_id": "1", "name": "Ana"}))
    with pytest.raises(
        TemplateRefused,
        match=r"takes the body values \['order_id', 'name'\]; missing \['name'\]; not in the template \['nme'\]",
    ):
        fill_template(
            named,
            TemplateValues(
                body={"order_id": "1", "nme": "Ana"}, header_media={"link": "https://x.example/l.pdf"}
            ),
        )
    with pytest.raises(TemplateRefused, match="must be an https:// address"):
        fill_template(
            named,
            TemplateValues(
                body={"order_id": "1", "name": "Ana"}, header_media={"link": "http://x.example/l.pdf"}
            ),
        )
    filled = fill_template(
        named,
        TemplateValues(
            body={"name": "Ana", "order_id": "1042"},
            header_media={"link": "https://x.example/l.pdf", "filename": "label.pdf"},
        ),
    )
    assert filled["components"] == [
        {
            "type": "header",
            "parameters": [
                {"type": "document", "document": {"link": "https://x.example/l.pdf", "filename": "label.pdf"}}
            ],
        },
        {
            "type": "body",
            "parameters": [
                {"type": "text", "text": "1042", "parameter_name": "order_id"},
                {"type": "text", "text": "Ana", "parameter_name": "name"},
            ],
        },
    ]


def test_a_text_header_over_60_characters_once_filled_is_refused() -> None:
    components = [
        {"type": "HEADER", "format": "TEXT", "text": "Order {{1}} update"},
        {"type": "BODY", "text": "Hi"},
    ]
    assert fill_template(template(components), TemplateValues(header="1042"))["components"] == [
        {"type": "header", "parameters": [{"type": "text", "text": "1042"}]}
    ]
    with pytest.raises(TemplateRefused, match="the header is longer than 60 characters once filled"):
        fill_template(template(components), TemplateValues(header="9" * 48))
    with pytest.raises(TemplateRefused, match="header takes one value"):
        fill_template(template(components), TemplateValues())


_value = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cc", "Cs", "Zl", "Zp")), min_size=1, max_size=40
).filter(lambda v: v.strip() and "     " not in v)


@hsettings(max_examples=60, suppress_health_check=[HealthCheck.too_slow])
@given(placeholders=st.integers(0, 6), values=st.lists(_value, max_size=8))
def test_body_values_are_accepted_exactly_when_there_are_as_many_as_placeholders(
    placeholders: int, values: list[str]
) -> None:
    text = "Hello " + " ".join(f"{{{{{i}}}}}" for i in range(1, placeholders + 1))
    tmpl = template([{"type": "BODY", "text": text}])
    if len(values) != placeholders:
        with pytest.raises(TemplateRefused, match=f"takes {placeholders} body value"):
            fill_template(tmpl, TemplateValues(body=values))
        return
    filled = fill_template(tmpl, TemplateValues(body=values))
    sent = [p["text"] for c in filled.get("components", []) for p in c["parameters"]]
    assert sent == values
