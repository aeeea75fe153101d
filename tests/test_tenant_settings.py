"""Tenant settings: one loader for every section, channel sections registered by their channel."""

from __future__ import annotations

import subprocess
import sys

import pytest
import structlog
from pydantic import BaseModel, ValidationError
from switchboard.channels.whatsapp.settings import WhatsAppSettings
from switchboard.tenant_settings import (
    KnowledgeSettings,
    TenantSettings,
    channel_sections,
    load_tenant_settings,
    register_section,
    set_section,
    tenant_settings_from,
)


def _fresh_python(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_every_section_is_typed_with_designs_defaults():
    settings = tenant_settings_from(None)
    assert (settings.tools.mutation_budget, settings.knowledge.embedding_model) == (None, None)
    assert settings.memory.returning_customer_window_days == 90
    assert settings.handoff.button_payloads == ["talk_to_human"]
    assert settings.whatsapp == WhatsAppSettings() == settings.channel(WhatsAppSettings)


def test_a_bad_section_is_logged_and_replaced_by_its_defaults_while_the_others_load():
    with structlog.testing.capture_logs() as logs:
        settings = tenant_settings_from(
            {
                "tools": {"mutation_budget": True},  # a bool is not a count
                "whatsapp": {"opt_out_reply": ""},
                "knowledge": {"embedding_model": "text-embedding-3-small"},
            },
            tenant_id="t-1",
        )
    invalid = {(e["section"], e["tenant_id"]) for e in logs if e["event"] == "tenant_settings_invalid"}
    assert invalid == {("tools", "t-1"), ("whatsapp", "t-1")}
    assert settings.tools.mutation_budget is None
    assert settings.whatsapp.opt_out_reply == WhatsAppSettings().opt_out_reply
    assert settings.knowledge.embedding_model == "text-embedding-3-small"


def test_unregistered_extras_are_dropped_and_registered_ones_validated():
    settings = TenantSettings(surprise={"x": 1}, whatsapp={"opt_out_payloads": ["NO"]})
    assert not hasattr(settings, "surprise")
    assert settings.whatsapp.opt_out_payloads == ["NO"]


def test_a_section_name_is_held_by_one_model():
    class Other(BaseModel):
        pass

    assert channel_sections()["whatsapp"] is WhatsAppSettings
    assert register_section("whatsapp", WhatsAppSettings) is WhatsAppSettings  # again: a no-op
    with pytest.raises(ValueError, match="already registered"):
        register_section("whatsapp", Other)
    with pytest.raises(ValueError, match="core"):
        register_section("loop", Other)
    with pytest.raises(KeyError):
        TenantSettings().channel(Other)


def test_the_loader_knows_channel_sections_in_a_process_that_never_imported_a_channel():
    out = _fresh_python(
        "import sys\n"
        "from switchboard.tenant_settings import tenant_settings_from\n"
        "assert 'switchboard.channels' not in sys.modules\n"
        "print(tenant_settings_from({'whatsapp': {'opt_out_reply': 'bye'}}).whatsapp.opt_out_reply)"
    )
    assert out == "bye"


def test_the_module_is_a_leaf_at_import_time():
    out = _fresh_python(
        "import sys, switchboard.tenant_settings\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith('switchboard'))))"
    )
    assert set(out.split()) <= {
        "switchboard",
        "switchboard.errors",
        "switchboard.llm",
        "switchboard.i18n",  # a leaf too: the catalogs load on first use
        "switchboard.llm.config",
        "switchboard.observability",
        "switchboard.observability.logs",
        "switchboard.observability.pii",  # a leaf: masking in every log line
        "switchboard.settings",
        "switchboard.tenant_settings",
    }


class _Row:
    def __init__(self, extensions: dict) -> None:
        self.settings_extensions = extensions


def test_set_section_merges_removes_with_none_and_validates_before_changing_anything():
    row = _Row({"knowledge": {"embedding_model": "old", "embedding_api_base": "http://a/v1"}, "agent": {}})
    section = set_section(row, "knowledge", embedding_model="new", embedding_api_base=None)
    assert section == KnowledgeSettings(embedding_model="new")
    assert row.settings_extensions == {"knowledge": {"embedding_model": "new"}, "agent": {}}
    before = row.settings_extensions
    with pytest.raises(ValidationError):
        set_section(row, "knowledge", min_similarity=5)
    with pytest.raises(KeyError):
        set_section(row, "nope", x=1)
    assert row.settings_extensions is before
    set_section(row, "whatsapp", opt_out_reply="Done.")
    set_section(row, "agent", name="Sam")  # a field may be called like the section's parameter
    settings = tenant_settings_from(row.settings_extensions)
    assert (settings.whatsapp.opt_out_reply, settings.agent.name) == ("Done.", "Sam")


async def test_load_tenant_settings_reads_the_tenant_row(make_tenant, sessions):
    tenant = await make_tenant(loop={"tool_timeout_s": 7}, whatsapp={"opt_out_payloads": ["BAJA"]})
    async with sessions() as session:
        settings = await load_tenant_settings(session, tenant.id)
        missing = await load_tenant_settings(session, tenant.organization_id)  # not a tenant id
    assert (settings.loop.tool_timeout_s, settings.whatsapp.opt_out_payloads) == (7, ["BAJA"])
    assert missing == TenantSettings()
