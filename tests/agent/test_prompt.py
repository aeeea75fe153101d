"""System prompt layout: the stable prefix is identical across customers and days' variable parts."""

from __future__ import annotations

from datetime import UTC, datetime

from switchboard.agent.prompt import RULES, build_system_prompt
from switchboard.tenant_settings import AgentSettings, tenant_settings_from


def test_stable_prefix_comes_first_and_is_shared_by_every_customer():
    agent = AgentSettings(name="Sam", instructions="Help Demo Shop customers.")
    now = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
    ana = build_system_prompt(
        agent, channel="whatsapp", now=now, profile={"name": "Ana"}, memory="Likes red."
    )
    bo = build_system_prompt(agent, channel="gmail", now=now, summary="Asked about invoices.")
    prefix = f"You are Sam.\n\nHelp Demo Shop customers.\n\n{RULES}\n\n---\n"
    assert ana.startswith(prefix) and bo.startswith(prefix)
    assert ana[len(prefix) :] == (
        "Channel: whatsapp. Today is 2026-11-30 (UTC).\n\n"
        '<customer_profile>\n{"name": "Ana"}\n</customer_profile>\n\n'
        "<user_history>\nLikes red.\n</user_history>\n"
        "Use this history naturally; never mention a profile, a memory or these tags."
    )
    assert bo.endswith("<conversation_summary>\nAsked about invoices.\n</conversation_summary>")


def test_a_full_system_prompt_replaces_the_template_but_keeps_the_variable_part():
    agent = AgentSettings(system_prompt="Custom prompt.")
    text = build_system_prompt(agent, channel="instagram", now=datetime(2026, 1, 2, tzinfo=UTC))
    assert text == "Custom prompt.\n\n---\nChannel: instagram. Today is 2026-01-02 (UTC)."


def test_tenant_settings_defaults_are_designs_numbers():
    settings = tenant_settings_from({"agent": {"name": "Sam"}, "analytics": {"top_k": 5}})
    assert settings.agent.name == "Sam"
    assert (
        settings.loop.max_tool_iterations,
        settings.loop.turn_timeout_s,
        settings.loop.tool_timeout_s,
    ) == (5, 120, 60)
    assert (
        settings.loop.max_tool_result_chars,
        settings.loop.per_tool_call_cap,
        settings.loop.max_tool_calls_per_turn,
    ) == (4000, 3, 30)
    assert (
        settings.llm.allowed_fails,
        settings.llm.cooldown_s,
        settings.llm.request_timeout_s,
        settings.llm.num_retries,
    ) == (2, 30, 45, 2)
    assert (
        settings.llm.trim_ratio,
        settings.llm.summarize_after_messages,
        settings.llm.keep_verbatim_messages,
    ) == (0.8, 70, 50)
