"""The job table: every job declared once, its options registered as declared, retries jittered and capped."""

from __future__ import annotations

import ast
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st
from switchboard.queue import jobs
from switchboard.queue.jobs import ALL_JOBS, Backoff, job_named
from switchboard.worker import WORKER_SETTINGS_BUILDERS

LIBS = Path(__file__).resolve().parents[2] / "libs" / "switchboard"


@given(
    base=st.floats(0.01, 60),
    factor=st.floats(1, 100),
    attempt=st.integers(-5, 10_000),
    share=st.floats(0, 1, exclude_max=True),
)
def test_a_retry_waits_between_half_and_all_of_its_capped_step(base, factor, attempt, share):
    backoff = Backoff(base, base * factor)
    wait = backoff.delay_s(attempt, rand=lambda: share)
    step = min(backoff.cap_s, base * 2 ** max(0, min(attempt, 64) - 1))
    assert step / 2 <= wait <= step + 1e-9
    assert wait <= backoff.cap_s + 1e-9


def test_retries_of_one_try_spread_out_instead_of_coming_back_together():
    waits = {round(Backoff(5.0, 60.0).delay_s(3), 6) for _ in range(50)}
    assert len(waits) > 40  # jittered: fifty jobs that failed at once do not all return at once
    assert min(waits) >= 10.0 and max(waits) <= 20.0  # try 3: step 5 * 2**2 = 20 s, half of it fixed


def test_backoff_doubles_per_try_up_to_its_cap():
    upper = [Backoff(1.0, 10.0).delay_s(n, rand=lambda: 1.0) for n in range(1, 7)]
    assert upper == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]


def test_every_registered_job_has_the_options_of_its_declaration(settings):
    registered = {}
    for build in WORKER_SETTINGS_BUILDERS.values():
        worker = build(settings)
        for function in worker.functions:
            registered[function.name] = (function.timeout_s, function.max_tries)
        for cron in worker.cron_jobs:
            registered[cron.name] = (cron.timeout_s, None)
    assert sorted(registered) == sorted(job.name for job in ALL_JOBS)
    for name, (timeout_s, max_tries) in registered.items():
        job = job_named(name)
        assert timeout_s == job.timeout_for(settings), name
        if not job.cron:
            assert max_tries == job.max_tries, name
    assert registered["process_inbound"][0] == settings.inbound_job_timeout_s
    assert registered["deliver_outbox"][0] == min(jobs.SIDE_JOB_TIMEOUT_S, settings.inbound_job_timeout_s)


def _string_constants(path: Path) -> set[str]:
    """String literals of a module, less docstrings and export lists (``__all__``, lazy-import maps: they
    name the job's *function*, which has the job's name)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped: set[int] = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            skipped.add(id(body[0].value))
        if isinstance(node, ast.Assign | ast.AnnAssign) and isinstance(
            node.value, ast.List | ast.Tuple | ast.Dict
        ):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(
                isinstance(t, ast.Name)
                and (
                    t.id == "__all__" or t.id.isupper() and "EXPORT" in t.id or t.id in ("_LAZY", "_EXPORTS")
                )
                for t in targets
            ):
                skipped.update(id(child) for child in ast.walk(node.value))
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skipped
    }


def test_no_job_name_is_written_as_a_string_outside_the_job_table():
    names = {job.name for job in ALL_JOBS}
    table = LIBS / "queue" / "jobs.py"
    offenders = {
        str(path.relative_to(LIBS)): sorted(found)
        for path in LIBS.rglob("*.py")
        if path != table and (found := _string_constants(path) & names)
    }
    # "ping" is also an ordinary word (the worker's ping job is declared in the table like every job)
    offenders = {path: [n for n in found if n != "ping"] for path, found in offenders.items()}
    assert {path: found for path, found in offenders.items() if found} == {}
