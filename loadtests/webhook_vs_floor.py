"""The WhatsApp webhook service side by side with a floor server doing the minimum durable work.

A floor benchmark kept in the repository, so a clone can run it.
Both servers run as one uvicorn process on the same embedded Postgres and Redis. The floor verifies
the HMAC, parses JSON, does one ``INSERT .. ON CONFLICT DO NOTHING`` and one ``LPUSH`` and answers 200:
the least any durable webhook can do. The project runs with the argv ``switchboard run`` uses
(:meth:`switchboard.runtime.services.ServiceSpec.command`) and the production log level (``INFO``, JSON;
``--log-level`` changes it).

Two loads, each alternating project and floor runs (A B A B: the machine is shared, trust the ratio):

* closed loop: C connections each posting as fast as answers come back (wrk with ``--wrk``, else a
  light asyncio client), unique signed bodies with 1 in 10 an exact redelivery; prints req/s,
  latency p50/p95/p99 and the server process's CPU ms per answered post (``/proc/<pid>/stat``) per
  run, and the project/floor ratios (medians over rounds).
* paced (``--paced N``): N senders, each on its own keep-alive connection posting one message a second
  (start times spread over the first second); prints acknowledgement p50/p95/p99/max per server.

``--profile FILE`` records the project process with py-spy during one extra closed-loop run and
prints the functions with the most samples (self and total); the raw collapsed stacks go to FILE.

usage:
    .venv/bin/python loadtests/webhook_vs_floor.py --quick            # ~1.5 min: conc 50 250, paced 250
    .venv/bin/python loadtests/webhook_vs_floor.py --wrk --conc 50 250 --seconds 8 --rounds 2 --paced 250
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import hashlib
import hmac
import json
import os
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if "--checkout" in sys.argv:  # measure another checkout (e.g. main before a change) with this script
    ROOT = Path(sys.argv[sys.argv.index("--checkout") + 1]).resolve()
sys.path[:0] = [str(ROOT), str(ROOT / "libs")]

SECRET = "perf-secret"
PNID = "106000000009999"

FLOOR_APP = r"""
import hashlib, hmac, json, os
import asyncpg, redis.asyncio as aioredis
SECRET = os.environ["META_APP_SECRET"].encode()
state = {}
async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            m = await receive()
            if m["type"] == "lifespan.startup":
                state["pg"] = await asyncpg.create_pool(os.environ["FLOOR_PG"], min_size=4, max_size=10)
                async with state["pg"].acquire() as c:
                    await c.execute("CREATE TABLE IF NOT EXISTS floor_msgs (id text PRIMARY KEY, body jsonb)")
                state["r"] = aioredis.from_url(os.environ["REDIS_URL"])
                await send({"type": "lifespan.startup.complete"})
            elif m["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"}); return
    if scope["type"] != "http":
        return
    body = b""
    while True:
        m = await receive(); body += m.get("body", b"")
        if not m.get("more_body"): break
    if scope["method"] != "POST":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"}); return
    headers = dict(scope["headers"])
    sig = headers.get(b"x-hub-signature-256", b"").decode()
    good = "sha256=" + hmac.new(SECRET, body, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(sig, good):
        await send({"type": "http.response.start", "status": 403, "headers": []})
        await send({"type": "http.response.body", "body": b"no"}); return
    doc = json.loads(body)
    mid = doc["entry"][0]["changes"][0]["value"]["messages"][0]["id"]
    async with state["pg"].acquire() as c:
        new = await c.fetchval("INSERT INTO floor_msgs VALUES ($1, $2) ON CONFLICT DO NOTHING RETURNING id", mid, body.decode())
    if new:
        await state["r"].lpush("floor:queue", mid)
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": b'{"status":"ok"}'})
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def body_for(i: int) -> bytes:
    """A real-shaped WhatsApp text delivery with a unique message id."""
    wa = f"1555{i % 100000:07d}"
    return json.dumps(
        {
            "object": "whatsapp_business_account",
            "entry": [
                {
                    "id": "102000000000001",
                    "changes": [
                        {
                            "field": "messages",
                            "value": {
                                "messaging_product": "whatsapp",
                                "metadata": {"display_phone_number": "15550100001", "phone_number_id": PNID},
                                "contacts": [{"profile": {"name": "Load"}, "wa_id": wa}],
                                "messages": [
                                    {
                                        "from": wa,
                                        "id": f"wamid.LOAD{random.getrandbits(64):016x}{i:08d}=",
                                        "timestamp": str(int(time.time())),
                                        "type": "text",
                                        "text": {"body": f"hello {i}"},
                                    }
                                ],
                            },
                        }
                    ],
                }
            ],
        }
    ).encode()


def signed(raw: bytes) -> bytes:
    """The HTTP/1.1 request bytes of one signed POST."""
    sig = "sha256=" + hmac.new(SECRET.encode(), raw, hashlib.sha256).hexdigest()
    head = (
        f"POST {{path}} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"X-Hub-Signature-256: {sig}\r\nContent-Length: {len(raw)}\r\n\r\n"
    )
    return head.encode() + raw


class Conn:
    """One keep-alive HTTP/1.1 connection (a tiny client: the load generator must cost little CPU)."""

    def __init__(self, port: int, path: str) -> None:
        self.port, self.path = port, path.encode()
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def post(self, request: bytes) -> int:
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        assert self.reader is not None
        self.writer.write(request.replace(b"{path}", self.path, 1))
        head = await self.reader.readuntil(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1])
        length, chunked = 0, False
        for line in head.split(b"\r\n"):
            lower = line.lower()
            if lower.startswith(b"content-length:"):
                length = int(line.split(b":", 1)[1])
            elif lower.startswith(b"transfer-encoding:") and b"chunked" in lower:
                chunked = True
        if not chunked:
            await self.reader.readexactly(length)
            return status
        while True:  # the floor answers without a length: uvicorn chunks it
            size = int((await self.reader.readuntil(b"\r\n")).strip(), 16)
            await self.reader.readexactly(size + 2)
            if size == 0:
                return status

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def quantiles(lat: list[float]) -> dict[str, float]:
    lat = sorted(lat) or [0.0]
    q = lambda p: lat[min(len(lat) - 1, int(p * len(lat)))]  # noqa: E731
    return {"p50": q(0.5), "p95": q(0.95), "p99": q(0.99), "max": lat[-1]}


async def closed_loop(port: int, path: str, conc: int, seconds: float) -> dict[str, Any]:
    lat: list[float] = []
    errs = 0
    prev: list[bytes] = []
    stop = time.perf_counter() + seconds
    counter = iter(range(10**9))

    async def worker() -> None:
        nonlocal errs
        conn = Conn(port, path)
        try:
            while time.perf_counter() < stop:
                req = (
                    random.choice(prev) if prev and random.random() < 0.1 else signed(body_for(next(counter)))
                )
                prev.append(req)
                del prev[:-200]
                t = time.perf_counter()
                try:
                    if await conn.post(req) != 200:
                        errs += 1
                except (OSError, asyncio.IncompleteReadError, ValueError):
                    errs += 1
                    conn.close()
                    conn = Conn(port, path)
                lat.append((time.perf_counter() - t) * 1000)
        finally:
            conn.close()

    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(conc)))
    wall = time.perf_counter() - t0
    return {"n": len(lat), "errors": errs, "rps": len(lat) / wall, **quantiles(lat)}


async def paced(
    port: int, path: str, senders: int, seconds: float, *, legacy_start: bool = False
) -> dict[str, Any]:
    """``senders`` customers, each posting one message a second on its own connection.

    The schedule starts once every sender has connected and had its first (unmeasured) post answered.
    It used to start 0.2 s after the senders were created: with 250 senders the server was still
    answering those first posts when the first due times passed, so the senders behind them fired
    at once (``late``) into that queue: a burst of the client's making, part of the project's
    paced p99 (~300 ms with ~50 late posts and p50 4-6 ms on an idle machine; the floor answers its
    first posts faster, so its queue drained sooner). ``late`` now counts only posts held up by a slow
    answer during the run.
    """
    lat: list[float] = []
    errs = 0
    late = 0
    counter = iter(range(10**9))
    start = time.perf_counter() + 0.2  # the legacy start; otherwise set when the last sender is ready
    connected = 0
    everyone_ready = asyncio.Event()

    async def sender(k: int) -> None:
        nonlocal errs, late, start, connected
        conn = Conn(port, path)
        await conn.post(signed(body_for(next(counter))))  # connect outside the measurement
        connected += 1
        if connected == senders:
            start = time.perf_counter() + 0.05
            everyone_ready.set()
        if not legacy_start:
            await everyone_ready.wait()
        due = start + k / senders  # spread over the first second
        end = start + seconds
        try:
            while due < end and time.perf_counter() < end:  # a server that falls behind is not waited for
                delay = due - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
                else:
                    late += 1
                req = signed(body_for(next(counter)))
                t = time.perf_counter()
                try:
                    if await conn.post(req) != 200:
                        errs += 1
                except (OSError, asyncio.IncompleteReadError, ValueError):
                    errs += 1
                    conn.close()
                    conn = Conn(port, path)
                lat.append((time.perf_counter() - t) * 1000)
                due += 1.0
        finally:
            conn.close()

    t0 = time.perf_counter()
    await asyncio.gather(*(sender(k) for k in range(senders)))
    wall = time.perf_counter() - t0
    return {"n": len(lat), "errors": errs, "rps": len(lat) / wall, "late": late, **quantiles(lat)}


def wrk_lua(path: Path, n: int) -> None:
    rows = []
    for i in range(n):
        raw = body_for(i) if i % 10 else body_for(i - 1 if i else 0)
        sig = "sha256=" + hmac.new(SECRET.encode(), raw, hashlib.sha256).hexdigest()
        rows.append("{" + json.dumps(raw.decode()) + "," + json.dumps(sig) + "}")
    path.write_text(
        "local reqs = {" + ",\n".join(rows) + "}\nlocal i = 0\n"
        f"request = function() i = i % {n} + 1; local r = reqs[i]; return wrk.format('POST', nil, "
        "{['Content-Type']='application/json', ['X-Hub-Signature-256']=r[2]}, r[1]) end\n"
    )


def drive_wrk(url: str, lua: Path, conc: int, seconds: float) -> dict[str, Any]:
    out = subprocess.run(
        [
            "wrk",
            "-t2",
            f"-c{conc}",
            f"-d{int(seconds)}s",
            "--timeout",
            "10s",
            "--latency",
            "-s",
            str(lua),
            url,
        ],
        capture_output=True,
        text=True,
        check=False,
    ).stdout

    def ms(tok: str) -> float:
        if tok.endswith("us"):
            return float(tok[:-2]) / 1000
        if tok.endswith("ms"):
            return float(tok[:-2])
        if tok.endswith("m"):
            return float(tok[:-1]) * 60000
        return float(tok.rstrip("s")) * 1000

    pct = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0].endswith("%"):
            pct[parts[0]] = ms(parts[1])
    rps = float(next(line.split()[1] for line in out.splitlines() if line.startswith("Requests/sec")))
    n = int(next(line.split()[0] for line in out.splitlines() if "requests in" in line))
    errs = sum(int(line.split()[-1]) for line in out.splitlines() if "Non-2xx" in line)
    errs += sum(
        int(x.rstrip(",")) for line in out.splitlines() if "Socket errors" in line for x in line.split()[3::2]
    )
    return {
        "n": n,
        "errors": errs,
        "rps": rps,
        "p50": pct.get("50%", 0),
        "p95": pct.get("90%", 0),
        "p99": pct.get("99%", 0),
        "max": 0.0,
    }


def cpu_s(pid: int) -> float:
    """User + system CPU seconds ``pid`` has used so far (``/proc/<pid>/stat``, Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def store_pids(marker: str) -> list[int]:
    """Pids of the embedded Postgres (postmaster and its backends) and Redis whose command line names
    ``marker`` (this run's temporary folder), and their children."""
    procs: dict[int, tuple[int, str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            ppid = int((entry / "stat").read_text().rpartition(")")[2].split()[1])
            procs[int(entry.name)] = (ppid, (entry / "cmdline").read_bytes().decode(errors="replace"))
        except (OSError, ValueError, IndexError):
            continue
    roots = {pid for pid, (_, cmd) in procs.items() if marker in cmd}
    return sorted(roots | {pid for pid, (ppid, _) in procs.items() if ppid in roots})


def store_cpu(marker: str) -> dict[int, float]:
    """CPU seconds so far per process of :func:`store_pids` (a pid that ended meanwhile is left out)."""
    out = {}
    for pid in store_pids(marker):
        try:
            out[pid] = cpu_s(pid)
        except (OSError, ValueError, IndexError):
            continue
    return out


def store_cpu_since(marker: str, before: dict[int, float]) -> float:
    """CPU seconds the store processes used since ``before`` (:func:`store_cpu`); new backends count whole."""
    return sum(now - before.get(pid, 0.0) for pid, now in store_cpu(marker).items())


def wait_healthy(port: int, proc: subprocess.Popen[bytes], path: str) -> None:
    deadline = time.monotonic() + 180  # a loaded machine imports slowly
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"server exited {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                s.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
                if s.recv(64).startswith(b"HTTP/1.1 200"):
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit("server never answered")


def profile_summary(raw: Path, top: int = 25) -> None:
    """Print the functions with the most samples from py-spy's collapsed stacks (self and total)."""
    own: collections.Counter[str] = collections.Counter()
    total: collections.Counter[str] = collections.Counter()
    samples = 0
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack:
            continue
        n = int(count)
        samples += n
        frames = [
            f.split(" (")[0] + " (" + f.split(" (")[1].split(":")[0].rsplit("/", 1)[-1] + ")"
            if " (" in f
            else f
            for f in stack.split(";")
        ]
        own[frames[-1]] += n
        for frame in set(frames):
            total[frame] += n
    print(f"profile: {samples} samples of the project process")
    print(f"{'self %':>7}  function")
    for name, n in own.most_common(top):
        print(f"{100 * n / samples:>7.1f}  {name}")
    print(f"{'total %':>7}  function (our code and the libraries on the path)")
    shown = 0
    for name, n in total.most_common():
        if any(
            k in name
            for k in (
                "switchboard",
                "sqlalchemy",
                "asyncpg",
                "redis",
                "arq",
                "structlog",
                "json",
                "fastapi",
                "starlette",
                "pydantic",
                "hmac",
                "uvicorn",
                "prometheus",
            )
        ):
            print(f"{100 * n / samples:>7.1f}  {name}")
            shown += 1
            if shown >= top:
                break


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--conc", type=int, nargs="+", default=[50, 250])
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--wrk", action="store_true", help="closed-loop load from wrk (apt install wrk)")
    ap.add_argument("--paced", type=int, default=0, metavar="N", help="also N senders at 1 msg/s each")
    ap.add_argument("--paced-seconds", type=float, default=15)
    ap.add_argument(
        "--paced-legacy-start",
        action="store_true",
        help="also run the old paced schedule (started 0.2 s after the senders, before they connected)",
    )
    ap.add_argument(
        "--project-target",
        default="",
        help="uvicorn factory of the project instead of the service's (e.g. "
        "loadtests.loop_lag_wrapper:create_app for loop-lag stacks)",
    )
    ap.add_argument("--quick", action="store_true", help="conc 50 250, 5 s, 2 rounds, paced 250 for 10 s")
    ap.add_argument("--profile", type=Path, help="py-spy the project during one extra run; raw stacks here")
    ap.add_argument("--profile-only", action="store_true", help="with --profile: stop after the profile")
    ap.add_argument(
        "--profile-native",
        action="store_true",
        help="with --profile: C frames too (py-spy --native; it pauses the process per sample)",
    )
    ap.add_argument(
        "--checkout", type=Path, default=ROOT, help="the repository to measure (default: this one)"
    )
    ap.add_argument("--log-level", default="INFO", help="the project's LOG_LEVEL (production default INFO)")
    ap.add_argument(
        "--port-base",
        type=int,
        default=0,
        help="Redis, the project and the floor on this port and the next two (default: free ports)",
    )
    a = ap.parse_args()
    if a.quick:
        a.conc, a.seconds, a.rounds, a.paced, a.paced_seconds = [50, 250], 5.0, 2, a.paced or 250, 10.0
    if a.wrk and not shutil.which("wrk"):
        raise SystemExit("--wrk needs wrk on PATH")

    from switchboard.db.engine import create_engine, session_factory, session_scope
    from switchboard.db.migrate import upgrade
    from switchboard.runtime.embedded import EmbeddedPostgres, EmbeddedRedis
    from switchboard.runtime.services import SERVICES
    from switchboard.settings import Settings
    from switchboard.tenants import add_channel_account, create_tenant

    with tempfile.TemporaryDirectory(prefix="sbperf-") as tmp:
        tmpp = Path(tmp)
        pg = EmbeddedPostgres(tmpp / "pg")
        ports = [a.port_base + k for k in range(3)] if a.port_base else [free_port() for _ in range(3)]
        rd = EmbeddedRedis(tmpp / "redis", ports[0])
        db = pg.start()
        rurl = rd.start()
        procs: list[subprocess.Popen[bytes]] = []
        try:
            upgrade(db)

            async def prep() -> None:
                eng = create_engine(db, pool_size=1)
                async with session_scope(session_factory(eng)) as s:
                    t = await create_tenant(s, slug="perf", name="Perf")
                    await add_channel_account(s, tenant=t, channel="whatsapp", external_account_id=PNID)
                await eng.dispose()

            asyncio.run(prep())
            env = dict(
                os.environ,
                DATABASE_URL=db,
                REDIS_URL=rurl,
                DATA_DIR=str(tmpp / "state"),
                META_APP_SECRET=SECRET,
                LOG_LEVEL=a.log_level,
                LOG_FORMAT="json",
                FLOOR_PG=db.replace("postgresql+asyncpg", "postgresql"),
            )
            pa, pb = ports[1], ports[2]
            (tmpp / "floor_app.py").write_text(FLOOR_APP)
            spec = next(s for s in SERVICES if s.name == "whatsapp")
            argv = spec.command(Settings(host="127.0.0.1", whatsapp_port=pa))  # what `switchboard run` starts
            if a.project_target:
                argv[argv.index(spec.target)] = a.project_target
            floor_argv = [
                sys.executable,
                "-m",
                "uvicorn",
                "floor_app:app",
                "--host",
                "127.0.0.1",
                "--port",
                str(pb),
                "--log-level",
                "warning",
                "--no-access-log",
            ]
            # the project's logs are written (production does) but not kept
            project = subprocess.Popen(
                argv, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            floor = subprocess.Popen(
                floor_argv, cwd=tmpp, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
            )
            procs = [project, floor]
            wait_healthy(pa, project, "/healthz")
            wait_healthy(pb, floor, "/")
            targets = {"project": (pa, "/webhooks/whatsapp"), "floor": (pb, "/")}
            pids = {"project": project.pid, "floor": floor.pid}
            store = str(tmpp)  # marks this run's Postgres and Redis processes (store_pids)
            for port, path in targets.values():  # warm up: pools, caches, prepared statements
                asyncio.run(closed_loop(port, path, 20, 2))
            print(
                f"webhook vs floor: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f} at start, project "
                f"LOG_LEVEL={a.log_level}, argv: {' '.join(argv[1:])}"
            )
            if a.wrk:
                lua = tmpp / "bodies.lua"
                wrk_lua(lua, 30000)

                def run(who: str, c: int) -> dict[str, Any]:
                    port, path = targets[who]
                    before, store_before = cpu_s(pids[who]), store_cpu(store)
                    out = drive_wrk(f"http://127.0.0.1:{port}{path}", lua, c, a.seconds)
                    n = max(1, out["n"])
                    return {
                        **out,
                        "cpu_ms": (cpu_s(pids[who]) - before) * 1000 / n,
                        "store_ms": store_cpu_since(store, store_before) * 1000 / n,
                    }

                print("closed loop from wrk (the p95 column is wrk's p90), 1 in 10 a redelivery")
            else:

                def run(who: str, c: int) -> dict[str, Any]:
                    before, store_before = cpu_s(pids[who]), store_cpu(store)
                    out = asyncio.run(closed_loop(*targets[who], c, a.seconds))
                    n = max(1, out["n"])
                    return {
                        **out,
                        "cpu_ms": (cpu_s(pids[who]) - before) * 1000 / n,
                        "store_ms": store_cpu_since(store, store_before) * 1000 / n,
                    }

                print("closed loop from an asyncio client, 1 in 10 a redelivery")
            if a.profile:
                spy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
                if not spy:
                    raise SystemExit("--profile needs py-spy (dev group)")
                rec = subprocess.Popen(
                    [
                        spy,
                        "record",
                        "--pid",
                        str(project.pid),
                        "--format",
                        "raw",
                        "--rate",
                        "200",
                        "--duration",
                        str(int(a.seconds)),
                        "--output",
                        str(a.profile),
                        "--native" if a.profile_native else "--nonblocking",
                    ],
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.DEVNULL,
                )
                time.sleep(0.5)
                run("project", max(a.conc))
                rec.wait(30)
                profile_summary(a.profile)
                if a.profile_only:
                    return
            print(
                f"{'conc':>5} {'who':>8} {'n':>7} {'err':>5} {'req/s':>8} {'p50':>7} {'p95':>7} {'p99':>7}  (ms)"
                f" {'cpu/req':>8} {'db/req':>7} (ms of CPU per answered post: the server process; Postgres + Redis)"
            )
            for c in a.conc:
                ratios = []
                for _ in range(a.rounds):
                    r = {who: run(who, c) for who in ("project", "floor")}
                    for who, x in r.items():
                        print(
                            f"{c:>5} {who:>8} {x['n']:>7} {x['errors']:>5} {x['rps']:>8.0f} {x['p50']:>7.1f} "
                            f"{x['p95']:>7.1f} {x['p99']:>7.1f}        {x['cpu_ms']:>8.3f} {x['store_ms']:>7.3f}"
                        )
                    ratios.append(
                        (
                            r["project"]["rps"] / r["floor"]["rps"],
                            r["project"]["p99"] / r["floor"]["p99"],
                            r["project"]["cpu_ms"] / r["floor"]["cpu_ms"],
                        )
                    )
                print(
                    f"{c:>5} ratio project/floor: req/s {statistics.median(x[0] for x in ratios):.2f}, "
                    f"p99 {statistics.median(x[1] for x in ratios):.2f}, "
                    f"cpu/req {statistics.median(x[2] for x in ratios):.2f}"
                )
            if a.paced:
                print(f"paced: {a.paced} senders x 1 msg/s for {a.paced_seconds:g} s, one connection each")
                print(
                    f"{'who':>8} {'n':>7} {'err':>5} {'late':>5} {'req/s':>7} {'p50':>7} {'p95':>7} {'p99':>7} {'max':>7}  (ms)"
                )
                starts = (False, True) if a.paced_legacy_start else (False,)
                for _ in range(a.rounds):
                    for who, legacy in ((w, lg) for lg in starts for w in ("project", "floor")):
                        x = asyncio.run(paced(*targets[who], a.paced, a.paced_seconds, legacy_start=legacy))
                        who = f"{who}{'*' if legacy else ''}"  # * the legacy start
                        print(
                            f"{who:>8} {x['n']:>7} {x['errors']:>5} {x['late']:>5} {x['rps']:>7.0f} {x['p50']:>7.2f} "
                            f"{x['p95']:>7.2f} {x['p99']:>7.2f} {x['max']:>7.2f}"
                        )
        finally:
            for p in procs:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
            rd.stop()
            pg.stop()


if __name__ == "__main__":
    main()
