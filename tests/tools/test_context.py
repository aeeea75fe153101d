"""The one idempotency key of a tool call, and the one shape of a tool error the model sees."""

from __future__ import annotations

import json
import uuid

import structlog
from sqlmodel import select
from switchboard.db.models import SecurityAlert
from switchboard.errors import ToolError, tool_error_result
from switchboard.tools.context import idempotency_key_for
from switchboard.tools.receipts import record_security_alert


def test_the_key_depends_on_the_message_the_tool_and_the_arguments_not_their_order():
    key = idempotency_key_for("trace-1", "create_lead", {"interest": "bikes", "notes": "x"})
    assert len(key) == 64 and int(key, 16) >= 0
    assert key == idempotency_key_for("trace-1", "create_lead", {"notes": "x", "interest": "bikes"})
    assert key != idempotency_key_for("trace-2", "create_lead", {"interest": "bikes", "notes": "x"})
    assert key != idempotency_key_for("trace-1", "schedule_meeting", {"interest": "bikes", "notes": "x"})
    assert key != idempotency_key_for("trace-1", "create_lead", {"interest": "bikes", "notes": "y"})


def test_a_tool_error_is_one_shape_for_the_model():
    assert ToolError("Forbidden", error_type="forbidden").as_result() == {
        "error": {"type": "forbidden", "message": "Forbidden", "retryable": False}
    }
    bad = ToolError(
        "invalid arguments",
        error_type="invalid_arguments",
        diagnostics=[{"field": "slot", "problem": "missing"}],
    )
    assert bad.as_result() == {
        "error": {
            "type": "invalid_arguments",
            "message": "invalid arguments (slot: missing)",
            "retryable": False,
            "diagnostics": [{"field": "slot", "problem": "missing"}],
        }
    }
    assert tool_error_result("timeout", "slow", retryable=True) == json.loads(
        json.dumps({"error": {"type": "timeout", "message": "slow", "retryable": True}})
    )


async def test_a_security_alert_is_written_and_a_failed_write_is_logged_not_raised(make_tenant, sessions):
    tenant = await make_tenant()
    details = {"tool_name": "create_lead", "where": "test"}
    await record_security_alert(
        sessions, tenant_id=tenant.id, kind="tool_forbidden", details=details, trace_id="t"
    )
    async with sessions() as session:
        row = (await session.exec(select(SecurityAlert).where(SecurityAlert.tenant_id == tenant.id))).one()
    assert (row.kind, row.details, row.trace_id) == ("tool_forbidden", details, "t")
    with structlog.testing.capture_logs() as logs:
        await record_security_alert(
            sessions, tenant_id=uuid.uuid4(), kind="tool_forbidden", details=details, trace_id=None
        )  # no such tenant: the foreign key refuses it
    assert [e["event"] for e in logs] == ["security_alert_not_written"]
