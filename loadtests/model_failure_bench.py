"""Model failures as a customer lives them: the first message they see, and whether their question is
answered once the provider is back.

One command starts ``switchboard run`` from this checkout (the harness of ``loadtests/faults.py``: its
ports, ``DATA_DIR``, the offline model with its ``/control`` hooks), then for each case breaks the demo
tenant's model provider, lets ``--customers`` new WhatsApp customers each ask one question (signed,
real-shaped webhooks), heals the provider ``--outage`` seconds after the fault began and waits up to
``--recover`` seconds for every question to be settled.

Cases (``--case``, repeatable; all by default):

* ``hanging``: the provider accepts the connection and never answers (offline model script ``hang``);
* ``refusing``: nothing listens any more (the model server is stopped, and kept down, by this script);
* ``5xx``: every call answers HTTP 500.

Printed per case:

* **first seen s**: from the customer's message to the first message they receive (the holding
  message, an answer, or a handoff notice), the longest over the customers; target: the tenant's
  ``agent.first_reply_deadline_s`` plus 1 s;
* **unsettled**: questions with neither an answer (a message other than the holding message or the
  error reply) nor their conversation handed to a person by the end; target: 0.

Usage::

    .venv/bin/python loadtests/model_failure_bench.py                 # every case (~10 minutes)
    .venv/bin/python loadtests/model_failure_bench.py --case hanging --customers 3

Exit status 0 when every case meets both targets. Everything started is stopped at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from loadtests import faults  # noqa: E402  (the switchboard run harness)

CASES = ("hanging", "refusing", "5xx")
DATA_DIR = Path(tempfile.gettempdir()) / "model-failure-bench"
MARGIN_S = 1.0
"""The first message may come this long after the deadline (seconds)."""


@dataclass
class Question:
    wa_id: str
    posted_at: float
    first_seen_s: float | None = None
    answered: bool = False
    handed_off: bool = False


@dataclass
class CaseResult:
    case: str
    deadline_s: float
    questions: list[Question] = field(default_factory=list)

    @property
    def first_seen_max_s(self) -> float | None:
        seen = [q.first_seen_s for q in self.questions if q.first_seen_s is not None]
        return max(seen) if len(seen) == len(self.questions) and seen else None

    @property
    def unsettled(self) -> int:
        return sum(1 for q in self.questions if not (q.answered or q.handed_off))

    @property
    def passed(self) -> bool:
        first = self.first_seen_max_s
        return first is not None and first <= self.deadline_s + MARGIN_S and self.unsettled == 0


async def _ask(client: httpx.AsyncClient, env: dict[str, Any], case: str, index: int) -> Question:
    from switchboard.channels.meta import post_signed
    from switchboard.channels.whatsapp.cli import build_text_webhook

    wa_id = f"1966{uuid.uuid4().int % 10**8:08d}{index:03d}"
    body = build_text_webhook(
        phone_number_id=env["phone_number_id"],
        wa_id=wa_id,
        text=f"model {case} customer {index}: do you ship to Portugal?",
    )
    raw = json.dumps(body, separators=(",", ":")).encode()
    question = Question(wa_id, time.time())
    for _ in range(20):  # Meta redelivers an unacknowledged webhook
        try:
            if (await post_signed(client, env["webhook"], raw, env["secret"])).is_success:
                return question
        except httpx.HTTPError:
            pass
        await asyncio.sleep(1.0)
    raise SystemExit(f"the webhook never acknowledged customer {index}")


async def _handed_off(database_url: str, wa_ids: list[str]) -> set[str]:
    """The customers (``wa_id``) whose conversation is with a person now."""
    from sqlalchemy import text
    from sqlalchemy.ext.asyncio import create_async_engine

    engine = create_async_engine(database_url)
    try:
        async with engine.connect() as conn:
            rows = await conn.execute(
                text(
                    "SELECT DISTINCT m.sender_external_id FROM messages m JOIN conversations c "
                    "ON c.id = m.conversation_id WHERE m.sender_external_id = ANY(:ids) AND c.status = 'human'"
                ),
                {"ids": wa_ids},
            )
            return {str(r[0]) for r in rows.all()}
    finally:
        await engine.dispose()


def _observe(result: CaseResult, records: list[dict[str, Any]], fixed: set[str]) -> None:
    """Fill first-seen times and answers from the sandbox's send log (``to``, ``at``, ``text``)."""
    for question in result.questions:
        mine = sorted((r for r in records if r["to"] == question.wa_id), key=lambda r: r["at"])
        if mine:
            question.first_seen_s = mine[0]["at"] - question.posted_at
        question.answered = any((r.get("text") or "").strip() not in fixed for r in mine)


async def run_case(
    stack: faults.Stack, args: argparse.Namespace, case: str, env: dict[str, Any]
) -> CaseResult:
    from switchboard.tenant_settings import AgentSettings

    agent = AgentSettings()  # the demo tenant keeps the default texts and deadline
    fixed = {agent.holding_reply.strip(), agent.error_reply.strip()}
    result = CaseResult(case, agent.first_reply_deadline_s)
    control = env["control"]
    model_control = f"{env['model_url']}/control/{faults.MODEL}"
    async with httpx.AsyncClient(timeout=30) as client:

        async def model(**body: Any) -> None:
            (await client.post(model_control, json=body, headers=control)).raise_for_status()

        after_seq = (await client.get(env["sandbox"], headers=control)).json()["last_seq"]
        supervisor: int | None = None
        if case == "hanging":
            await model(default={"kind": "hang"})
        elif case == "5xx":
            await model(default={"kind": "error", "status": 500})
        else:  # refusing: the supervisor paused so it does not start the model server again yet
            assert stack.process is not None
            supervisor = stack.process.pid
            os.kill(supervisor, signal.SIGSTOP)
            os.kill(stack.pid_of("model_server"), signal.SIGKILL)
        fault_at = time.monotonic()
        result.questions = list(
            await asyncio.gather(*(_ask(client, env, case, i) for i in range(args.customers)))
        )
        await asyncio.sleep(max(0.0, args.outage - (time.monotonic() - fault_at)))
        if supervisor is not None:
            os.kill(supervisor, signal.SIGCONT)  # it starts the model server again
            for _ in range(240):
                try:
                    if (await client.get(f"{env['model_url']}/healthz", timeout=2)).status_code < 500:
                        break
                except httpx.HTTPError:
                    pass
                await asyncio.sleep(0.5)
        await model(default={"kind": "demo"}, latency_s=0.0)
        healed = time.monotonic()
        wa_ids = [q.wa_id for q in result.questions]
        while True:
            records = [
                r
                for r in (
                    await client.get(env["sandbox"], params={"after": after_seq}, headers=control)
                ).json()["messages"]
            ]
            _observe(result, records, fixed)
            handed = await _handed_off(env["database_url"], wa_ids)
            for question in result.questions:
                question.handed_off = question.wa_id in handed
            if result.unsettled == 0 or time.monotonic() - healed > args.recover:
                break
            await asyncio.sleep(2.0)
    return result


def _line(r: CaseResult) -> str:
    first = r.first_seen_max_s
    first_text = f"{first:.1f}" if first is not None else "never"
    target = r.deadline_s + MARGIN_S
    return (
        f"{r.case:<10} {len(r.questions):>9} {first_text:>13} {target:>8.1f} {r.unsettled:>9}  "
        f"{'PASS' if r.passed else 'FAIL'}"
    )


async def main_async(args: argparse.Namespace) -> int:
    stack = faults.Stack(quick=True)
    print(f"starting switchboard run (DATA_DIR={faults.DATA_DIR}) ...", flush=True)
    stack.start()
    results: list[CaseResult] = []
    try:
        for key, value in faults._env().items():
            if key in faults.PORTS or key == "DATA_DIR":
                os.environ[key] = value
        from switchboard.settings import load_settings

        settings = load_settings()
        database_url = stack.state["embedded_database_url"]
        env = {
            "database_url": database_url,
            "phone_number_id": await faults._phone_number_id(database_url),
            "webhook": settings.service_url(settings.whatsapp_port) + "/webhooks/whatsapp",
            "sandbox": settings.whatsapp_sandbox_url + "/_control/sent",
            "model_url": settings.service_url(settings.model_server_port),
            "control": {"Authorization": f"Bearer {settings.secret('admin_token')}"},
            "secret": settings.secret("meta_app_secret"),
        }
        for case in args.case or CASES:
            print(f"-- {case}", flush=True)
            result = await run_case(stack, args, case, env)
            results.append(result)
            print(_line(result), flush=True)
    finally:
        stack.stop()
    print()
    print("first seen s: the longest wait of a customer for their first message; unsettled: questions")
    print("with neither an answer nor a person by the end (targets: the deadline + 1 s, and 0)")
    print(f"{'case':<10} {'questions':>9} {'first seen s':>13} {'target':>8} {'unsettled':>9}  verdict")
    for result in results:
        print(_line(result))
    return 0 if all(r.passed for r in results) else 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--case", action="append", choices=CASES, help="run only this case (repeatable)")
    parser.add_argument("--customers", type=int, default=5, help="customers asking one question each (5)")
    parser.add_argument("--outage", type=float, default=40.0, help="how long the provider is broken (40 s)")
    parser.add_argument(
        "--recover", type=float, default=150.0, help="how long questions may take once it is back (150 s)"
    )
    parser.add_argument(
        "--port-base", type=int, default=9720, help="the run's eleven ports are BASE..BASE+10"
    )
    parser.add_argument(
        "--data-dir", type=Path, default=DATA_DIR, help=f"the run's DATA_DIR, wiped first ({DATA_DIR})"
    )
    args = parser.parse_args()
    faults.DATA_DIR = args.data_dir
    for offset, key in enumerate(faults.PORTS):
        faults.PORTS[key] = args.port_base + offset
    raise SystemExit(asyncio.run(main_async(args)))


if __name__ == "__main__":
    main()
