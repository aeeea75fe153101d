"""An ``offline`` deployment a tenant adds without an ``api_base`` answers from the platform's own
offline model server (``MODEL_SERVER_URL``), never from OpenAI's endpoint."""

from __future__ import annotations

from switchboard.llm.config import DeploymentSettings
from switchboard.tenant_config.probe import probe_deployment


async def test_an_offline_deployment_without_a_base_uses_the_platforms_model_server(
    make_settings, offline_model
):
    state, url = offline_model
    settings = make_settings(model_server_url=url.removesuffix("/v1"))
    result = await probe_deployment(
        settings, DeploymentSettings(id="mine", provider="offline", model="offline-demo")
    )
    assert result.ok, result.error
    assert result.deployment_id == "mine"
