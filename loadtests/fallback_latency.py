"""Fallback latency: how long a turn's model call takes when the primary deployment fails.

Scenarios (each ``--calls`` times, every call on a fresh tenant Router so the primary is *not*
cooling down yet, i.e. the worst case: the failing primary is really called):

* ``healthy``: the primary answers (the baseline: one HTTP round trip through the Router);
* ``429+Retry-After``: the primary answers ``429`` with ``Retry-After: 47`` (``--retry-after``);
* ``empty``: the primary answers ``200`` with a whitespace-only completion;
* ``429, cooling``: the same Router again after a 429: the primary is skipped (cooldown).

The backup deployment answers at once. Both deployments are on the offline model server (run in
this process on a free loopback port, so the HTTP path through LiteLLM is real). The tenant policy
is the default (``num_retries=2``, ``max_retry_wait_s=1``): LiteLLM's own retries would wait out the
429's header twice (it honours up to 60 s) and the turn would time out.

Run (from the repository root)::

    .venv/bin/python loadtests/fallback_latency.py [--calls 30] [--retry-after 47]
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "libs"))

import switchboard  # noqa: E402,F401  (sets LITELLM_LOCAL_MODEL_COST_MAP before litellm loads)
import uvicorn  # noqa: E402
from switchboard.crypto import CredentialCipher  # noqa: E402
from switchboard.llm.config import LLMSettings  # noqa: E402
from switchboard.llm.router import ModelGateway  # noqa: E402
from switchboard.observability import configure_logging  # noqa: E402
from switchboard.settings import Settings  # noqa: E402
from switchboard.standins.offline_server import OfflineModelState, ScriptedResponse, create_offline_app  # noqa: E402

MESSAGES = [{"role": "user", "content": "Where is my order?"}]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _serve(state: OfflineModelState) -> tuple[str, uvicorn.Server]:
    port = _free_port()
    server = uvicorn.Server(
        uvicorn.Config(create_offline_app(state), host="127.0.0.1", port=port, log_level="warning")
    )
    threading.Thread(target=server.run, daemon=True).start()
    while not server.started:
        time.sleep(0.02)
    return f"http://127.0.0.1:{port}", server


def _percentiles(values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    return f"p50 {statistics.median(ordered):7.1f}  p95 {p95:7.1f}  max {ordered[-1]:7.1f}"


async def main(calls: int, retry_after: int) -> None:
    configure_logging(service="loadtest", level="ERROR")
    state = OfflineModelState()
    url, server = _serve(state)
    data_dir = tempfile.mkdtemp(prefix="switchboard-fallback-")
    settings = Settings(
        data_dir=Path(data_dir),
        openai_api_key=None,
        anthropic_api_key=None,
        egress_allow_loopback=True,  # the measured deployments are model servers on this machine
    )
    gateway = ModelGateway(
        settings=settings, cipher=CredentialCipher(settings.secret("encryption_key").encode())
    )
    figures: dict[str, list[float]] = {}
    answered_by_backup: dict[str, int] = {}
    failures = {
        "healthy": None,
        f"429+Retry-After: {retry_after}": ScriptedResponse(
            kind="error", status=429, headers={"Retry-After": str(retry_after)}
        ),
        "empty (whitespace) answer": ScriptedResponse(kind="empty", content="  \n "),
    }
    warm = LLMSettings.model_validate(
        {"deployments": [{"id": "warm", "provider": "offline", "model": "warm", "api_base": url + "/v1"}]}
    )
    await gateway.complete(
        gateway.router_for(uuid.uuid4(), warm), MESSAGES, tools=None, llm=warm, trace_id="w"
    )
    for label, failure in failures.items():
        for _ in range(calls):
            primary, backup = f"p-{uuid.uuid4().hex[:8]}", f"b-{uuid.uuid4().hex[:8]}"
            llm = LLMSettings.model_validate(
                {
                    "deployments": [
                        {
                            "id": primary,
                            "provider": "offline",
                            "model": primary,
                            "api_base": url + "/v1",
                            "priority": 1,
                        },
                        {
                            "id": backup,
                            "provider": "offline",
                            "model": backup,
                            "api_base": url + "/v1",
                            "priority": 2,
                        },
                    ]
                }
            )
            if failure is not None:
                state.script(primary).default = failure
            else:
                state.script(primary).default = ScriptedResponse(content="primary")
            state.script(backup).default = ScriptedResponse(content="backup")
            router = gateway.router_for(uuid.uuid4(), llm)
            started = time.perf_counter()
            reply = await gateway.complete(router, MESSAGES, tools=None, llm=llm, trace_id="load")
            figures.setdefault(label, []).append((time.perf_counter() - started) * 1000)
            answered_by_backup[label] = answered_by_backup.get(label, 0) + (reply.model_id == backup)
            if label.startswith("429"):
                started = time.perf_counter()
                again = await gateway.complete(router, MESSAGES, tools=None, llm=llm, trace_id="load")
                figures.setdefault("429, primary cooling (next call)", []).append(
                    (time.perf_counter() - started) * 1000
                )
                key = "429, primary cooling (next call)"
                answered_by_backup[key] = answered_by_backup.get(key, 0) + (again.model_id == backup)
    print(f"fallback latency, {calls} calls each (ms, one model call through the tenant Router)")
    for label, values in figures.items():
        print(
            f"  {label:<34} {_percentiles(values)}   answered by backup {answered_by_backup[label]}/{len(values)}"
        )
    server.should_exit = True
    await asyncio.sleep(0.2)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=30)
    parser.add_argument("--retry-after", type=int, default=47)
    args = parser.parse_args()
    asyncio.run(main(args.calls, args.retry_after))
