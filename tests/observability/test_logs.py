"""Library loggers write through structlog: one JSON object a line, no ANSI colour codes; arq's
heartbeat at DEBUG; the offline model server logs its start, stop and each request."""

from __future__ import annotations

import json
import logging
import logging.config

import httpx
import pytest
import uvicorn.config
from structlog.testing import capture_logs
from switchboard.llm import import_litellm
from switchboard.observability import configure_logging
from switchboard.standins.offline_server import create_offline_app


def _json_lines(err: str) -> list[dict]:
    return [json.loads(line) for line in err.splitlines() if line.strip()]


def test_a_litellm_line_is_one_json_object_without_colour_codes(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(service="test", level="INFO", fmt="json")
    import_litellm()  # LiteLLM adds its own coloured handler at import; it is taken off again
    from litellm._logging import verbose_router_logger

    verbose_router_logger.warning("\x1b[92mlitellm.acompletion(model=openai/x)\x1b[0m Exception 503")
    (line,) = _json_lines(capsys.readouterr().err)
    assert (line["event"], line["level"], line["service"]) == (
        "litellm.acompletion(model=openai/x) Exception 503",
        "warning",
        "test",
    )
    assert logging.getLogger("LiteLLM Router").handlers == []


def test_uvicorns_own_handlers_give_way_to_the_json_formatter(capsys: pytest.CaptureFixture[str]) -> None:
    logging.config.dictConfig(uvicorn.config.LOGGING_CONFIG)  # what uvicorn does before the app factory runs
    configure_logging(service="test", level="INFO", fmt="json")
    logging.getLogger("uvicorn.error").warning("Started server process [%d]", 42)
    (line,) = _json_lines(capsys.readouterr().err)
    assert (line["event"], line["level"]) == ("Started server process [42]", "warning")
    assert logging.getLogger("uvicorn").handlers == [] and logging.getLogger("uvicorn.access").handlers == []


def test_arq_heartbeat_is_debug(capsys: pytest.CaptureFixture[str]) -> None:
    heartbeat = logging.getLogger("arq.worker")
    configure_logging(service="worker", level="INFO", fmt="json")
    heartbeat.info("recording health: %s", "Dec-01 15:00:00 j_complete=1 j_failed=0")
    heartbeat.info("Starting worker for %d functions", 3)
    assert [line["event"] for line in _json_lines(capsys.readouterr().err)] == [
        "Starting worker for 3 functions"
    ]
    configure_logging(service="worker", level="DEBUG", fmt="json")
    heartbeat.info("recording health: %s", "Dec-01 15:00:10 j_complete=1 j_failed=0")
    ((line,),) = [[entry for entry in _json_lines(capsys.readouterr().err) if "recording" in entry["event"]]]
    assert line["level"] == "debug"


async def test_the_model_server_logs_start_stop_and_each_request_at_debug() -> None:
    configure_logging(service="model_server", level="DEBUG", fmt="json")
    app = create_offline_app()
    with capture_logs() as logs:
        async with app.router.lifespan_context(app):
            async with httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app), base_url="http://m"
            ) as client:
                assert (await client.get("/v1/models")).status_code == 200
    events = [(entry["event"], entry["log_level"]) for entry in logs]
    assert events == [
        ("model_server_started", "info"),
        ("model_server_request", "debug"),
        ("model_server_stopped", "info"),
    ]
    (request,) = [entry for entry in logs if entry["event"] == "model_server_request"]
    assert (request["method"], request["path"], request["status"]) == ("GET", "/v1/models", 200)


def test_an_idle_cron_run_logs_at_debug_and_a_busy_one_at_info(capsys: pytest.CaptureFixture[str]) -> None:
    from switchboard.observability.logs import quiet_idle_cron_jobs

    arq = logging.getLogger("arq.worker")
    quiet_idle_cron_jobs(["deliver_outbox_sweep"])
    configure_logging(service="worker", level="INFO", fmt="json")
    arq.info("%6.2fs → %s(%s)%s", 0.01, "deliver_outbox_sweep", "", "")
    arq.info("%6.2fs ← %s ● %s", 0.02, "deliver_outbox_sweep", "{'sent': 0, 'failed': 0}")
    arq.info("%6.2fs ← %s ● %s", 0.02, "deliver_outbox_sweep", "None")
    arq.info("%6.2fs ← %s ● %s", 0.03, "deliver_outbox_sweep", "{'sent': 2, 'failed': 0}")
    arq.info("%6.2fs → %s(%s)%s", 0.01, "abc123:process_inbound", "x", "")  # a job, not a cron job
    arq.warning("%6.2fs ! %s failed, %s: %s", 0.1, "deliver_outbox_sweep", "RuntimeError", "boom")
    events = [(line["level"], line["event"].split()[-1]) for line in _json_lines(capsys.readouterr().err)]
    assert events == [
        ("info", "0}"),  # the run that sent 2 keeps its line
        ("info", "abc123:process_inbound(x)"),
        ("warning", "boom"),
    ]
    configure_logging(service="worker", level="DEBUG", fmt="json")
    arq.info("%6.2fs → %s(%s)%s", 0.01, "deliver_outbox_sweep", "", "")
    ((line,),) = [_json_lines(capsys.readouterr().err)]
    assert line["level"] == "debug"


def test_cli_commands_log_readable_lines_unless_json_is_asked_for(capsys: pytest.CaptureFixture[str]) -> None:
    log = logging.getLogger("switchboard.cli.test")
    configure_logging(service="cli", level="WARNING", fmt="auto", interactive=True)  # stderr: not a TTY here
    log.warning("kb_reindex_slow")
    line = capsys.readouterr().err.strip()
    assert not line.startswith("{") and "[warning  ] kb_reindex_slow" in line and "service=cli" in line
    configure_logging(service="cli", level="WARNING", fmt="json", interactive=True)
    log.warning("kb_reindex_slow")
    (entry,) = _json_lines(capsys.readouterr().err)
    assert entry["event"] == "kb_reindex_slow"
    configure_logging(service="worker", level="WARNING", fmt="auto")  # a service: JSON off a terminal
    log.warning("queue_slow")
    (entry,) = _json_lines(capsys.readouterr().err)
    assert entry["service"] == "worker"
