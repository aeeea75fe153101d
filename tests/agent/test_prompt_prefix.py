"""The prompt prefix stays identical across turns and customers (provider prompt caching): measured on
the requests the offline model server received, and printed (docs/agent.md#budgets)."""

from __future__ import annotations

from switchboard.llm.prefix import prefix_report

from tests.utils.agent import deployment, llm_settings, make_conversation, text, unique_model

DEMO_INSTRUCTIONS = (  # the demo tenant's (switchboard/seed.py)
    "You are Sam, the friendly support agent of Demo Shop. Answer briefly and only from what the tools "
    "return; when unsure, say so and offer a human."
)
TURNS = ("Hi, what are your opening hours?", "And on Sunday?", "Thanks, bye for now")


async def test_the_stable_prefix_is_identical_across_turns_and_customers(
    make_tenant, sessions, offline_model, orchestrator
):
    state, url = offline_model
    model = unique_model("prefix")
    tenant = await make_tenant(
        llm=llm_settings(deployment(url, model)),
        agent={"name": "Sam", "instructions": DEMO_INSTRUCTIONS},
    )
    script = state.script(model)
    groups = []
    for n in range(3):
        conv = await make_conversation(sessions, tenant)
        start = len(script.requests)
        for turn in TURNS:
            script.push(text(f"answer {n}: {turn[::-1]}"))
            await orchestrator.handle_turn(conv.request(f"{turn} (customer {n})"))
        groups.append(script.requests[start:])
    report = prefix_report(groups)
    print(
        f"\nprompt prefix: {report.requests} requests, stable block (tools + system prompt) identical: "
        f"{report.stable_block_identical}, {report.stable_block_tokens} tokens; consecutive turns share "
        f"{report.mean_shared_prefix_share:.1%} of the request as an identical prefix (min "
        f"{report.min_shared_prefix_share:.1%}); across conversations {report.cross_conversation_shared_chars} chars"
    )
    assert report.requests == 9 and report.consecutive_pairs == 6
    assert report.stable_block_identical
    assert report.stable_block_tokens > 200  # built-in tools only here; MCP tools add their schemas
    assert report.min_shared_prefix_share > 0.8
    tools_and_system = len(groups[0][0]["messages"][0]["content"].split("\n\n---\n")[0])
    assert report.cross_conversation_shared_chars > tools_and_system
