"""``switchboard simulate whatsapp|instagram|gmail``: the options that only shape a ``--text`` message
are refused with ``--payload`` (the payload names its own sender), before anything is posted; WhatsApp's
``--from`` replaces a payload's sender instead, and a ``--from`` that is no phone number is refused."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from switchboard.cli.channel_common import failed_send_line

from tests.utils import gmail, instagram, whatsapp
from tests.utils.cli import Cli

PAYLOADS = {
    "whatsapp": whatsapp.payload_path("text.json"),
    "instagram": instagram.payload_path("text_dm.json"),
    "gmail": gmail.payload_path("messages_get_full_multipart_alternative.json"),
}
SENDERS = {"whatsapp": "+15550107777", "instagram": "1000000000000042", "gmail": "ana@example.net"}


def _cli(tmp_path: Path) -> Cli:
    # No database or service answers here: a command that got past the option check would fail on
    # the database (nothing listens on this port of the task's range), not with the message below.
    return Cli(
        env={
            "DATA_DIR": str(tmp_path),
            "DATABASE_URL": "postgresql+asyncpg://nobody:nothing@127.0.0.1:9569/none",
            "REDIS_URL": "redis://127.0.0.1:9568/0",
            "LOG_LEVEL": "WARNING",
        }
    )


@pytest.mark.parametrize("channel", ["instagram", "gmail"])
def test_from_with_payload_is_refused_with_exit_2(channel: str, tmp_path: Path) -> None:
    payload = PAYLOADS[channel]
    assert payload.is_file()
    out = _cli(tmp_path).run("simulate", channel, "--payload", str(payload), "--from", SENDERS[channel])
    assert out.exit_code == 2, out.output
    assert out.stderr == "error: --from cannot be combined with --payload: the payload names its sender\n"
    assert out.stdout == ""


def test_gmail_subject_with_payload_is_refused_with_exit_2(tmp_path: Path) -> None:
    out = _cli(tmp_path).run("simulate", "gmail", "--payload", str(PAYLOADS["gmail"]), "--subject", "Hi")
    assert out.exit_code == 2, out.output
    assert out.stderr == (
        "error: --subject cannot be combined with --payload: the payload has its own Subject header\n"
    )


@pytest.mark.parametrize("channel", ["instagram", "gmail"])
def test_help_says_from_is_for_text_only(channel: str, tmp_path: Path) -> None:
    out = _cli(tmp_path).run("simulate", channel, "--help", COLUMNS="200")
    assert out.exit_code == 0, out.output
    assert "Refused with --payload: the payload names its sender" in out.stdout


def test_whatsapp_help_says_from_replaces_a_payloads_sender(tmp_path: Path) -> None:
    out = _cli(tmp_path).run("simulate", "whatsapp", "--help", COLUMNS="400")
    assert out.exit_code == 0, out.output
    assert "With --payload: replaces the sender of every customer message in it" in out.stdout
    assert "Refused with --payload" not in out.stdout


@pytest.mark.parametrize("source", [("--text", "hi"), ("--payload", str(PAYLOADS["whatsapp"]))])
def test_a_whatsapp_from_that_is_no_phone_number_is_refused_with_exit_2(
    source: tuple[str, str], tmp_path: Path
) -> None:
    out = _cli(tmp_path).run("simulate", "whatsapp", *source, "--from", "ana")
    assert out.exit_code == 2, out.output
    assert out.stderr == "error: --from must be a phone number (6 to 15 digits, '+' optional), not 'ana'\n"


@pytest.mark.parametrize(
    ("channel", "flag", "why"),
    [
        ("whatsapp", "--keep-ids", "a --text message always gets a new wamid"),
        ("whatsapp", "--keep-timestamps", "a --text message is sent now"),
        ("instagram", "--keep-ids", "a --text message always gets a new mid"),
        ("instagram", "--keep-timestamps", "a --text message is sent now"),
    ],
)
def test_payload_flags_with_text_are_refused_with_exit_2(
    channel: str, flag: str, why: str, tmp_path: Path
) -> None:
    out = _cli(tmp_path).run("simulate", channel, "--text", "hi", flag)
    assert out.exit_code == 2, out.output
    assert out.stderr == f"error: {flag} only applies to --payload: {why}\n"
    assert out.stdout == ""


@pytest.mark.parametrize("channel", ["whatsapp", "instagram", "gmail"])
def test_a_missing_payload_file_is_named_as_missing_with_exit_2(channel: str, tmp_path: Path) -> None:
    missing = tmp_path / "text.json"
    out = _cli(tmp_path).run("simulate", channel, "--payload", str(missing))
    assert out.exit_code == 2, out.output
    assert out.stderr == f"error: {missing}: no such file\n"


async def test_a_sandbox_that_stops_answering_while_waiting_is_one_line_and_exit_1(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``print_sent`` polls the sandbox; when ``switchboard run`` stops meanwhile (nothing listens on the
    port any more) the wait ends with one line, not an ``httpx.ConnectError`` traceback."""
    import httpx
    import typer
    from switchboard.cli.channel_common import print_sent

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/_control/sent"
    async with httpx.AsyncClient(timeout=2) as client:
        with pytest.raises(typer.Exit) as stopped:
            await print_sent(client, url, after=0, wait_s=5, fields=("to",))
    assert stopped.value.exit_code == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: lost the sandbox at {url} while waiting for replies (ConnectError)")
    assert err.count("\n") == 1


def _unsent(code: str, message: str, attempts: int) -> dict[str, object]:
    return {
        "recipient": "15550100099",
        "status": "failed",
        "error_code": code,
        "error_message": message,
        "attempts": attempts,
    }


def test_a_reply_the_window_refused_is_not_called_a_send_to_retry() -> None:
    """A row failed ``window_closed`` before any send: the line says it was never sent and that a retry
    fails the same way until the customer writes, not "after 0 attempt(s) ... retry it"."""
    line = failed_send_line(
        _unsent("window_closed", "outside the 24-hour customer-service window: needs a template", 0)
    )
    assert line.startswith(
        "a reply to 15550100099 was written but its send failed: window_closed outside the 24-hour"
    )
    assert "not sent: refused before any attempt" in line
    assert "the customer (or, for an agent, the agent) writes to the business first" in line
    assert "attempt(s)" not in line and "retry it from" not in line
    assert "refused before any attempt" in failed_send_line(_unsent("agent_window_closed", "no template", 0))


def test_a_send_that_failed_for_good_counts_its_attempts_and_points_at_the_retry() -> None:
    one = failed_send_line(_unsent("131026", "Message undeliverable", 1))
    assert one == (
        "a reply to 15550100099 was written but its send failed: 131026 Message undeliverable (after 1 attempt). "
        "Fix the cause, then retry it from the console's Platform page (failed sends; a platform admin's page: "
        "`switchboard users add EMAIL --role platform_admin --generate`)."
    )
    assert "(after 5 attempts)" in failed_send_line(_unsent("rate_limited", "", 5))
