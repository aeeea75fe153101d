"""Tenant-set text is bounded at save, and no tenant setting grows ``/metrics``: "Test this deployment"
records no series, and the labels a tenant names (model, deployment, tool) are bounded sets."""

from __future__ import annotations

import httpx
import pytest
from hypothesis import given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families
from switchboard.db.models import Tenant
from switchboard.observability.metrics import LABEL_VALUE_MAX_CHARS, OTHER_LABEL, LabelValues

from services.orchestrator.main import create_app
from tests.utils.model_fixtures import offline_model  # noqa: F401  (fixture)
from tests.utils.servers import serve_app
from tests.utils.tenants import without_test_defaults

LONG_MODEL = "m" * 20_000


def series(text: str) -> set[tuple[str, frozenset]]:
    """Every series of a ``/metrics`` text (name and labels), values left out."""
    return {
        (sample.name, frozenset(sample.labels.items()))
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


@pytest.fixture
async def api(settings):
    """The orchestrator under uvicorn with an admin client (``/metrics`` is the process's registry)."""
    async with serve_app(create_app(settings)) as url:
        headers = {"Authorization": f"Bearer {settings.secret('admin_token')}"}
        async with httpx.AsyncClient(base_url=url, headers=headers, timeout=60) as client:
            yield client


async def _stored(sessions, tenant_id) -> dict:
    async with sessions() as session:
        return without_test_defaults((await session.get(Tenant, tenant_id)).settings_extensions)


@pytest.mark.parametrize(
    ("model", "words"),
    [
        (LONG_MODEL, "at most 200 characters"),
        ("gpt-4o mini", "letters, digits and . _ : / @ + - only"),
        ('gpt"}\n# HELP fake', "letters, digits and . _ : / @ + - only"),
        ("-leading-dash", "letters, digits and . _ : / @ + - only"),
    ],
)
async def test_a_bad_model_name_is_refused_at_save_with_a_clear_message(
    api, make_tenant, sessions, model, words
):
    tenant = await make_tenant()
    deployment = {"id": "main", "provider": "offline", "model": model, "api_base": "http://127.0.0.1:9/v1"}
    response = await api.patch(
        f"/v1/admin/tenants/{tenant.slug}/settings", json={"llm": {"deployments": [deployment]}}
    )
    assert response.status_code == 422, response.text
    [problem] = response.json()["detail"]
    assert problem["path"] == "llm.deployments[0].model"
    assert words in problem["message"]
    assert await _stored(sessions, tenant.id) == {}

    embedding = await api.put(f"/v1/admin/tenants/{tenant.slug}/knowledge/embedding", json={"model": model})
    assert embedding.status_code == 422, embedding.text
    assert words in embedding.text
    assert await _stored(sessions, tenant.id) == {}


async def test_model_names_in_use_are_accepted(api, make_tenant):
    tenant = await make_tenant()
    names = ["gpt-4o-mini", "llama3.1:8b", "meta-llama/Llama-3.1-8B-Instruct", "claude-3-5-sonnet@20240620"]
    deployments = [
        {"id": f"d{n}", "provider": "openai_compatible", "model": name, "api_base": "http://127.0.0.1:9/v1"}
        for n, name in enumerate(names)
    ]
    response = await api.patch(
        f"/v1/admin/tenants/{tenant.slug}/settings", json={"llm": {"deployments": deployments}}
    )
    assert response.status_code == 200, response.text
    assert [d["model"] for d in response.json()["settings"]["sections"]["llm"]["deployments"]] == names


async def test_many_deployment_tests_add_no_series_to_metrics(api, make_tenant, offline_model):  # noqa: F811
    """Each test of a deployment (a new id and the longest model name allowed each time) answers,
    and ``/metrics`` has the same series after as before."""
    _state, url = offline_model
    tenant = await make_tenant()
    base = f"/v1/admin/tenants/{tenant.slug}/settings"
    before = series((await api.get("/metrics")).text)
    names = []
    for n in range(5):
        name = f"probe{n}-" + "x" * (200 - 7)
        names.append(name)
        deployment = {"id": f"probe-{n}", "provider": "offline", "model": name, "api_base": f"{url}/v1"}
        saved = await api.patch(base, json={"llm": {"deployments": [deployment]}})
        assert saved.status_code == 200, saved.text
        probe = await api.post(f"{base}/deployments/probe-{n}/test")
        assert probe.status_code == 200, probe.text
        assert probe.json()["ok"] is True, probe.json()
    text = (await api.get("/metrics")).text
    assert series(text) == before
    assert not any(name in text for name in names)


@hypothesis_settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=400), max_size=60), st.integers(min_value=0, max_value=20))
def test_label_values_are_a_bounded_set(values, max_values):
    labels = LabelValues(max_values)
    seen = [labels(value) for value in values]
    kept = {value for value in seen if value != OTHER_LABEL}
    assert len(kept) <= max_values
    for value, label in zip(values, seen, strict=True):
        assert label in (value, OTHER_LABEL)
        assert len(label) <= LABEL_VALUE_MAX_CHARS and label.isascii() and label.isprintable()
    # a value once admitted keeps its own series
    assert all(labels(value) == value for value in kept)
