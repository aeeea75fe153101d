"""Every /api/v1 route × every scope: a key with exactly the route's scope passes, every other scope is
refused with 403 insufficient_scope; another tenant's key never reaches this tenant's rows. The merged
OpenAPI document validates and every operation in it answers with a valid key."""

from __future__ import annotations

import re

from openapi_spec_validator import validate
from switchboard.public_api import route_scopes
from switchboard.users import API_SCOPES

from tests.public_api.conftest import fill, request_body

# Destructive operations last, so that every other one still finds its rows.
_LAST = (
    "closeConversation",
    "reopenConversation",
    "eraseCustomer",
    "deleteDocument",
    "deleteWebhookEndpoint",
)
"""Operations that end what others need, walked last in this order (a closed conversation reopens)."""


async def _operations(client) -> list[tuple[str, str, dict]]:  # type: ignore[no-untyped-def]
    document = (await client.get("/api/v1/openapi.json")).json()
    found = [
        (method.upper(), path, operation)
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
    ]
    return sorted(
        found,
        key=lambda op: (
            _LAST.index(op[2]["operationId"]) + 1 if op[2]["operationId"] in _LAST else 0,
            op[0] == "DELETE",
            op[2]["operationId"],
        ),
    )


async def test_each_scope_allows_exactly_its_routes(world, api, api_app, make_key) -> None:
    scopes = route_scopes(api_app.routes)
    assert len(scopes) >= 20
    keys = {scope: await make_key(world.tenant, scopes=[scope]) for scope in API_SCOPES}
    async with api() as client:
        operations = await _operations(client)
    assert {(m, p) for m, p, _ in operations} == set(scopes)
    for method, path, operation in operations:
        needed = operation["x-scope"]
        assert scopes[(method, path)] == needed
        for scope, key in keys.items():
            async with api(key) as client:
                response = await client.request(
                    method, fill(path, world.ids), **request_body(operation["operationId"], world)
                )
            what = f"{method} {path} with {scope}"
            if scope == needed:
                assert response.status_code not in (401, 403, 404, 500), f"{what}: {response.text}"
            else:
                assert response.status_code == 403, f"{what}: {response.text}"
                assert response.json()["code"] == "insufficient_scope", what


async def test_another_tenants_key_finds_nothing_of_this_tenant(world, make_tenant, api, make_key) -> None:
    stranger = await make_key(await make_tenant("Stranger Shop"))
    async with api(stranger) as client:
        for method, path, operation in await _operations(client):
            response = await client.request(
                method, fill(path, world.ids), **request_body(operation["operationId"], world)
            )
            what = f"{method} {path}"
            if "{" in path:
                assert response.status_code == 404, f"{what}: {response.text}"
                assert response.json()["code"] == "not_found"
            elif method == "GET" and response.status_code == 200:
                body = response.json()
                items = body["items"] if isinstance(body, dict) else body
                assert not any(str(v) in response.text for v in world.ids.values()), what
                assert isinstance(items, list)


async def test_the_merged_openapi_validates_and_every_operation_answers(world, api, make_key) -> None:
    key = await make_key(world.tenant)
    async with api() as anonymous:
        response = await anonymous.get("/api/v1/openapi.json")
        docs_page = await anonymous.get("/api/v1/docs")
    assert response.status_code == 200
    document = response.json()
    validate(document)
    assert document["servers"] and document["components"]["securitySchemes"]["apiKey"]["scheme"] == "bearer"
    assert "/v1/admin" not in str(document["paths"]) and "Problem" in document["components"]["schemas"]
    assert docs_page.status_code == 200 and "/api/v1/openapi.json" in docs_page.text
    ids = []
    async with api(key) as client:
        for method, path, operation in await _operations(client):
            operation_id = operation["operationId"]
            ids.append(operation_id)
            assert re.fullmatch(r"[a-z]+[A-Za-z]*", operation_id) and len(operation_id) <= 24, operation_id
            assert operation["tags"] and operation["security"] == [{"apiKey": []}]
            assert "401" in operation["responses"] and "429" in operation["responses"], operation_id
            answer = await client.request(method, fill(path, world.ids), **request_body(operation_id, world))
            assert answer.status_code < 400, f"{method} {path}: {answer.status_code} {answer.text}"
    assert len(ids) == len(set(ids))
    assert {
        "listConversations",
        "getConversation",
        "listMessages",
        "listCustomers",
        "updateCustomer",
        "uploadDocument",
        "searchKnowledge",
        "listLeads",
        "sendFeedback",
        "createWebhookEndpoint",
    } <= set(ids)
