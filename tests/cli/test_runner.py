"""The pieces every command shares: one-line errors, the run.json-aware settings, the database runner."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import typer
from sqlalchemy.exc import DBAPIError
from switchboard.cli.runner import command_settings, describe_error, friendly_errors
from switchboard.errors import TenantNotFound


def test_errors_a_user_can_act_on_are_one_line_and_exit_2(capsys):
    @friendly_errors
    def command(exc: BaseException) -> None:
        raise exc

    cases = {
        TenantNotFound("acme"): "error: tenant not found: acme",
        ValueError("bad value"): "error: bad value",
        FileNotFoundError(2, "No such file", "/nope.csv"): "error: no such file: /nope.csv",
        DBAPIError("SELECT 1", {}, Exception('relation "tenants" does not exist')): (
            'error: database: relation "tenants" does not exist (run `switchboard db upgrade`)'
        ),
    }
    for exc, line in cases.items():
        with pytest.raises(typer.Exit) as done:
            command(exc)
        assert done.value.exit_code == 2
        assert capsys.readouterr().err.strip() == line
    with pytest.raises(KeyError):  # a bug keeps its traceback
        command(KeyError("x"))
    assert describe_error(RuntimeError("x")) is None


def test_settings_follow_run_json_only_while_its_process_lives(tmp_path, monkeypatch):
    monkeypatch.setenv("DATA_DIR", str(tmp_path))
    monkeypatch.delenv("WHATSAPP_PORT", raising=False)
    state = tmp_path / "run.json"
    state.write_text(
        json.dumps({"pid": os.getpid(), "network": {"host": "127.0.0.1", "whatsapp_port": 9181}})
    )
    assert command_settings().whatsapp_port == 9181
    assert command_settings(attach_to_run=False).whatsapp_port == 8101
    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    state.write_text(json.dumps({"pid": int(gone.stdout), "network": {"whatsapp_port": 9181}}))
    assert command_settings().whatsapp_port == 8101  # a stale run.json is ignored


@pytest.mark.parametrize(
    ("ms", "shown"),
    [
        (None, "-"),
        (0.4, "0 ms"),
        (340.26, "340 ms"),
        (1234.5678, "1.2 s"),
        (59_990.0, "1 min"),
        (184_000.4, "3 min 4 s"),
        (7_500_000.0, "2 h 5 min"),
        (-5.0, "0 ms"),
    ],
)
def test_human_duration_reads_like_a_person_would_say_it(ms, shown) -> None:  # type: ignore[no-untyped-def]
    from switchboard.cli.runner import human_duration

    assert human_duration(ms) == shown
