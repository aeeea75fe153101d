"""Fixtures: a tenant with a WhatsApp number of its own (``tests/utils/whatsapp_fixtures.py``), a scripted
offline model and the scratch database (``tests/utils/channel_fixtures.py``), spans."""

from tests.utils.channel_fixtures import e2e_settings, model, offline_model, scratch_settings
from tests.utils.tracing import spans
from tests.utils.whatsapp_fixtures import ai_tenant, script, wa_tenant

__all__ = [
    "ai_tenant",
    "e2e_settings",
    "model",
    "offline_model",
    "scratch_settings",
    "script",
    "spans",
    "wa_tenant",
]
