"""CPU of the orchestrator's claim alone (``Orchestrator._claim``: the claim and the context it reads).

A new claim per call (each on its own conversation, the inbound row inserted by the claim as in
``orchestrator_overhead.py``), no model and no persist: 50 warm-up claims, then three rounds of 100,
each printed as the process CPU (ms) per claim. Steadier than the whole turn's CPU, whose LiteLLM path
moves by more than the claim costs on a shared machine.

Run (from the repository root): ``.venv/bin/python loadtests/turn_claim_cpu.py`` (~15 s, an embedded
Postgres in a temporary folder). For an A/B, run the other checkout's code with
``PYTHONPATH=OTHER/libs:OTHER``, interleaved.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from switchboard.db.migrate import upgrade  # noqa: E402
from switchboard.runtime.embedded import EmbeddedPostgres  # noqa: E402

from loadtests import orchestrator_overhead as harness  # noqa: E402


async def run(database_url: str) -> None:
    settings = harness.load_settings(
        database_url=database_url,
        _env_file=None,
        data_dir=Path(tempfile.mkdtemp()),
        egress_allow_loopback=True,  # the tenant's deployment is the model server on this machine
    )
    engine = harness.create_engine(database_url, pool_size=5)
    sessions = harness.session_factory(engine)
    async with sessions() as session, session.begin():
        tenant = await harness.create_tenant(
            session, slug=f"claim-{uuid.uuid4().hex[:8]}", name="Claim bench"
        )
    gateway = harness.ModelGateway(
        settings=settings, cipher=harness.CredentialCipher(settings.secret("encryption_key").encode())
    )
    orchestrator = harness.Orchestrator(sessions=sessions, gateway=gateway, toolsets=[])
    requests = [
        harness._request(tenant.id, pair) for pair in await harness._conversations(sessions, tenant.id, 350)
    ]
    for request in requests[:50]:  # warm-up: imports, the pool, SQLAlchemy's compiled cache
        await orchestrator._claim(request, "0" * 32)
    rounds = []
    for start in (50, 150, 250):
        started = time.process_time()
        for request in requests[start : start + 100]:
            await orchestrator._claim(request, "0" * 32)
        rounds.append((time.process_time() - started) * 1000 / 100)
    await engine.dispose()
    load = os.getloadavg()
    print(
        "claim CPU per call (ms), three rounds of 100: "
        + " / ".join(f"{ms:.2f}" for ms in rounds)
        + f" (load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f})"
    )


def main() -> None:
    argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], epilog="No options: it prints three figures and exits."
    ).parse_args()
    harness.configure_logging(service="loadtest", level="WARNING", fmt="console")
    postgres = EmbeddedPostgres(Path(tempfile.mkdtemp(prefix="sb-claim-")) / "postgres")
    database_url = postgres.start()
    try:
        upgrade(database_url)
        asyncio.run(run(database_url))
    finally:
        postgres.stop()


if __name__ == "__main__":
    main()
