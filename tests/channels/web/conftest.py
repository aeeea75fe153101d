"""Fixtures: a tenant with a WhatsApp number of its own, where its human agents work
(``tests/utils/whatsapp_fixtures.py``)."""

from tests.utils.whatsapp_fixtures import script, wa_tenant

__all__ = ["script", "wa_tenant"]
