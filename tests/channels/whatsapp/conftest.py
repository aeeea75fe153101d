"""Fixtures: a tenant with a WhatsApp number of its own (``tests/utils/whatsapp_fixtures.py``), spans."""

from tests.utils.tracing import spans
from tests.utils.whatsapp_fixtures import ai_tenant, script, wa_tenant

__all__ = ["ai_tenant", "script", "spans", "wa_tenant"]
