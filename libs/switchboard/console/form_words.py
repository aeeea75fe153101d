"""Words the console shows that the code builds at run time, marked for the gettext catalog
(``make i18n`` extracts only literal strings): labels and section titles of the agent settings form
(:func:`switchboard.tenant_config.form.form_sections` makes them from the settings' field names) and the
inbox's mode filter values (:class:`switchboard.console.inbox.Mode`) and the outcomes of turns and tool calls. ``tests/console/test_spanish.py``
fails when a label has neither a Spanish text nor an entry here.

The templates translate them with ``_(f.label)`` / ``_(m)``.
"""

from __future__ import annotations

from switchboard.i18n import N_

__all__ = ["FORM_WORDS", "MODE_WORDS", "OUTCOME_WORDS"]

FORM_WORDS = (
    N_("action"),
    N_("agent template language"),
    N_("agent template name"),
    N_("allowed fails"),
    N_("allowed origins"),
    N_("always on tools"),
    N_("api base"),
    N_("api key"),
    N_("app key sha256"),
    N_("approval expired reply"),
    N_("approval timeout s"),
    N_("auto reply cap"),
    N_("auto reply window s"),
    N_("budget"),
    N_("button payloads"),
    N_("chunk overlap chars"),
    N_("chunk size chars"),
    N_("closes"),
    N_("colour"),
    N_("connect timeout s"),
    N_("cooldown s"),
    N_("customer rate limit"),
    N_("customer rate window s"),
    N_("day"),
    N_("default context window tokens"),
    N_("deployments"),
    N_("embedding api base"),
    N_("embedding api key"),
    N_("embedding model"),
    N_("enabled"),
    N_("error reply"),
    N_("fallback reserve s"),
    N_("farewell"),
    N_("farewell reply"),
    N_("feedback"),
    N_("fetch profiles"),
    N_("first reply deadline s"),
    N_("gmail"),
    N_("greeting en"),
    N_("greeting es"),
    N_("guardrails"),
    N_("handoff reply"),
    N_("holding reply"),
    N_("holidays"),
    N_("hours"),
    N_("id"),
    N_("inactivity close s"),
    N_("input"),
    N_("instagram"),
    N_("instructions"),
    N_("intent check"),
    N_("intent window messages"),
    N_("messages days"),
    N_("memory days"),
    N_("traces days"),
    N_("leads days"),
    N_("event deliveries days"),
    N_("keep verbatim messages"),
    N_("language"),
    N_("leads"),
    N_("max chars"),
    N_("max input tokens"),
    N_("max output tokens"),
    N_("max raw tool result chars"),
    N_("max retry after cooldown s"),
    N_("max retry wait s"),
    N_("max tool calls per turn"),
    N_("max tool iterations"),
    N_("max tool result chars"),
    N_("min similarity"),
    N_("monthly usd"),
    N_("mutation budget"),
    N_("name"),
    N_("num retries"),
    N_("opens"),
    N_("opt out payloads"),
    N_("opt out reply"),
    N_("out of hours reply"),
    N_("output"),
    N_("outside hours"),
    N_("per tool call cap"),
    N_("priority"),
    N_("provider"),
    N_("queue reply"),
    N_("request timeout s"),
    N_("returning customer window days"),
    N_("schedule"),
    N_("sender name"),
    N_("slowdown reply"),
    N_("summarize after messages"),
    N_("summary max chars"),
    N_("system prompt"),
    N_("tenant rate limit"),
    N_("tenant rate window s"),
    N_("timeout s"),
    N_("timezone"),
    N_("title"),
    N_("tool timeout s"),
    N_("trim ratio"),
    N_("turn timeout s"),
    N_("typed replies"),
    N_("waiting reply"),
    N_("warn ratio"),
    N_("web"),
    N_("whatsapp"),
)
"""Settings form labels and section titles without a msgid elsewhere."""

MODE_WORDS = (N_("ai"), N_("human"), N_("waiting"), N_("closed"))
"""The inbox's mode filter values."""

OUTCOME_WORDS = (
    N_("answered"), N_("silent"), N_("degraded"), N_("blocked"), N_("skipped"),
    N_("ok"), N_("error"), N_("rejected"), N_("timeout"),
)  # fmt: skip
"""A turn's outcome (:data:`switchboard.agent.loop.Outcome`, ``skipped``) and a tool call's
(:data:`switchboard.tools.receipts.Outcome`), shown on the conversation page."""
