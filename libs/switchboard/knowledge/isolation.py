"""Parse customer uploads in a child process that a hostile file cannot stall or blow up.

A PDF of a few kilobytes can keep pypdf busy for minutes, and a spreadsheet of a few kilobytes can
claim a million rows by 16,384 columns. Parsing such a file in a thread of a service would hold a
core and the service's memory with no way to stop it. :func:`parse_isolated` runs
:func:`~switchboard.knowledge.parsers.parse_document` in a child process instead:

* **wall-clock timeout** (``KB_PARSE_TIMEOUT_S``): the child is killed when it has not answered;
* **memory cap** (``KB_PARSE_MEMORY_LIMIT_MB``): the child's address space may grow by at most
  this much (``RLIMIT_AS``), so an allocation past it raises ``MemoryError`` there, and a DOCX or
  XLSX whose parts unpack to more is refused before it is decompressed;
* a CPU-time limit a little above the timeout, so a child outlives a dead parent by seconds only;
* at most ``KB_PARSE_CONCURRENCY`` children per process at once (others wait for a slot, and the
  wait does not count against the timeout).

Each limit ends in :class:`~switchboard.knowledge.parsers.DocumentTooComplex` (reason
``too_complex``), which the ingestion path reports like any unreadable file: nothing is stored.

How: the first parse starts a *helper*, a fresh single-threaded interpreter (``python -c``, so it
never re-runs the service's own main module) that imports the parsing libraries once (pypdf alone
takes over a second). For each parse the helper forks a child, which lowers its own limits and
parses; the helper waits for the child's answer with the timeout and kills it when it is late.
So a parse costs a fork, not an interpreter start, and the fork is made ahead, while the helper
waits for its next request (:func:`_serve`). Up to ``KB_PARSE_CONCURRENCY``
helpers are kept per service process; they exit when that process exits (their request pipe
closes). Unix only (``os.fork``, ``resource``).
"""

from __future__ import annotations

import atexit
import math
import os
import pickle
import queue
import resource
import signal
import subprocess
import threading
from dataclasses import dataclass
from functools import cache
from multiprocessing.connection import Connection
from typing import Any

from switchboard.errors import SwitchboardError
from switchboard.helper_process import start_helper
from switchboard.knowledge.parsers import (
    MIB,
    DocumentRejected,
    DocumentTooComplex,
    ParsedDocument,
    parse_document,
)
from switchboard.observability import get_logger
from switchboard.settings import Settings

__all__ = ["ParseLimits", "ParserUnavailable", "parse_isolated"]

log = get_logger(__name__)

_PRELOAD = ("pypdf", "docx", "openpyxl", "defusedxml.ElementTree")
"""Imported once by each helper, so forked children start with them."""
_CPU_GRACE_S = 2
"""CPU seconds a child may use beyond the wall-clock timeout before the kernel stops it (a child
whose helper died meanwhile)."""
_HELPER_GRACE_S = 15.0
"""How much longer than the timeout the service waits for a helper's answer before it gives the
helper up (the helper itself kills a late child at the timeout)."""
_HELPER_START_TIMEOUT_S = 120.0
"""How long a new helper may take to import the parsing libraries and say it is ready."""

Outcome = tuple[Any, ...]
"""What a child answers: ``("parsed", ParsedDocument)``, ``("rejected", reason, detail)``,
``("memory",)``, ``("error", text)``; the helper adds ``("timeout",)`` and ``("died", status)``."""


class ParserUnavailable(SwitchboardError):
    """The helper process could not be started: nothing is known about the file (try again later)."""


@dataclass(frozen=True, kw_only=True)
class ParseLimits:
    """How long and how much memory one parse may take, and how many run at once per process."""

    timeout_s: float = 30.0
    """Wall-clock seconds from the child's start to its answer."""
    memory_limit_bytes: int = 512 * MIB
    """Address space the child may add to what it starts with (the helper's libraries and the file)."""
    max_concurrent: int = 2
    """Parses this process runs at once (one helper each)."""

    @classmethod
    def from_settings(cls, settings: Settings) -> ParseLimits:
        return cls(
            timeout_s=settings.kb_parse_timeout_s,
            memory_limit_bytes=settings.kb_parse_memory_limit_mb * MIB,
            max_concurrent=settings.kb_parse_concurrency,
        )


def parse_isolated(data: bytes, filename: str, limits: ParseLimits) -> ParsedDocument:
    """Parse ``data`` in a child process within ``limits``. Blocking: call it with ``asyncio.to_thread``.

    Args:
        data: the file's bytes.
        filename: the uploaded name (reports; picks CSV/Markdown/TXT among text files).
        limits: timeout, memory cap and concurrency (:meth:`ParseLimits.from_settings`).

    Returns:
        What :func:`~switchboard.knowledge.parsers.parse_document` returns.

    Raises:
        DocumentTooComplex: the parse timed out or ran out of its memory, or the file is a ZIP or
            XML bomb or over pypdf's limits.
        DocumentRejected: encrypted, corrupt, empty, image-only or unsupported file.
        ParserUnavailable: no helper process could be started.
    """
    with _slots(limits.max_concurrent):
        outcome = _pool.run((data, filename, limits.timeout_s, limits.memory_limit_bytes), limits.timeout_s)
    status = outcome[0]
    if status == "parsed":
        return outcome[1]
    if status == "rejected":
        _, reason, detail = outcome
        if reason == "too_complex":
            raise DocumentTooComplex(filename, detail.removeprefix("file too complex: "))
        raise DocumentRejected(filename, reason, detail)
    if status == "timeout":
        log.warning("knowledge_parse_timeout", filename=filename, timeout_s=limits.timeout_s)
        raise DocumentTooComplex(filename, f"parsing took longer than {limits.timeout_s:g} s")
    if status == "memory":
        log.warning("knowledge_parse_memory", filename=filename, limit_mib=limits.memory_limit_bytes // MIB)
        raise DocumentTooComplex(
            filename, f"parsing needed more than {limits.memory_limit_bytes / MIB:g} MiB of memory"
        )
    if status == "died":  # killed by the kernel (CPU limit) or crashed in a C extension
        log.warning("knowledge_parse_died", filename=filename, status=outcome[1])
        raise DocumentTooComplex(filename, f"the parser stopped ({outcome[1]})")
    # an exception our parsers do not expect (a library bug on a malformed file): the file is unreadable
    log.warning("knowledge_parse_crashed", filename=filename, error=outcome[1])
    raise DocumentRejected(filename, "corrupt", f"unreadable file ({outcome[1]})")


@cache
def _slots(max_concurrent: int) -> threading.BoundedSemaphore:
    return threading.BoundedSemaphore(max_concurrent)


# --- the service's side: a pool of helpers ---------------------------------------------------


class _Helper:
    """One helper process and the two pipes to it."""

    def __init__(self) -> None:
        # the imports take seconds: wait here, so they never count against a parse's timeout
        self.process, self.requests, self.answers = start_helper(
            "switchboard.knowledge.isolation", start_timeout_s=_HELPER_START_TIMEOUT_S, what="parse helper"
        )

    def close(self) -> None:
        self.requests.close()  # the helper exits when it reads EOF
        self.answers.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


class _HelperPool:
    def __init__(self) -> None:
        self._idle: queue.SimpleQueue[_Helper] = queue.SimpleQueue()
        self._all: set[_Helper] = set()
        self._lock = threading.Lock()

    def run(self, request: tuple[Any, ...], timeout_s: float) -> Outcome:
        try:
            helper = self._idle.get_nowait()
        except queue.Empty:
            try:
                helper = _Helper()
            except (OSError, EOFError) as exc:  # not the file's fault: the service cannot parse now
                log.error("knowledge_parse_helper_failed", error=f"{type(exc).__name__}: {exc}")
                raise ParserUnavailable(f"the document parser could not start ({exc})") from exc
            with self._lock:
                self._all.add(helper)
        try:
            helper.requests.send(request)
            if not helper.answers.poll(timeout_s + _HELPER_GRACE_S):
                raise TimeoutError("the parse helper did not answer")
            outcome = helper.answers.recv()
        except (OSError, EOFError, TimeoutError) as exc:  # the helper died or hangs: replace it
            log.warning("knowledge_parse_helper_lost", error=f"{type(exc).__name__}: {exc}")
            self._discard(helper)
            return ("timeout",) if isinstance(exc, TimeoutError) else ("died", "the parse helper exited")
        self._idle.put(helper)
        return outcome

    def _discard(self, helper: _Helper) -> None:
        with self._lock:
            self._all.discard(helper)
        helper.process.kill()
        helper.close()

    def close(self) -> None:
        with self._lock:
            helpers, self._all = list(self._all), set()
        for helper in helpers:
            helper.close()


_pool = _HelperPool()
atexit.register(_pool.close)


# --- the helper's side --------------------------------------------------------------------------


def _serve(request_fd: int, answer_fd: int) -> None:
    """The helper's main loop: one request at a time, each parsed in a forked child (see module doc).

    The child for the next request is forked as soon as the previous one is answered (a *spare*,
    waiting for its request on a pipe), so the fork is off the request's path: forking the ~100 MB
    helper takes 30-50 ms on the 2-core VM the benchmarks run on (page tables, copy-on-write), a
    third of a one-page upload's ingestion, while handing a request to a waiting child takes well
    under a millisecond. Each child still parses one file only and starts from the helper's state.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C of `switchboard run` stops the service; we follow
    for module in _PRELOAD:
        __import__(module)
    requests = Connection(request_fd, writable=False)
    answers = Connection(answer_fd, readable=False)
    spare = _Spare.fork(request_fd, answer_fd)
    answers.send(("ready",))
    while True:
        try:
            request = requests.recv()
        except EOFError:  # the service closed the pipe or exited
            spare.close()
            return
        child = spare
        if not child.give(request):  # the spare died meanwhile (killed from outside): a fresh one
            child = _Spare.fork(request_fd, answer_fd)
            child.give(request)
        timeout_s = request[2]
        del request  # the next spare must not start with this file's bytes
        answers.send(child.outcome(timeout_s))
        child.reap()  # after the answer: a forked helper's exit (its page tables) takes milliseconds
        spare = _Spare.fork(request_fd, answer_fd)  # while the service works on what it got


def _warm_up() -> None:
    """In a spare child, before its request: parse and pickle a constant text, so the pages that
    path writes (reference counts, caches) are copied now rather than while a request waits (a
    one-page text file's parse, load ~6: ~13 ms without this, 4-14 ms with it)."""
    pickle.dumps(("parsed", parse_document(b"warm up a text parse", "warm.txt")))


class _Spare:
    """A forked child waiting for the one request it will parse (helper side)."""

    def __init__(self, pid: int, task: Connection, answer: Connection) -> None:
        self.pid, self.task, self.answer = pid, task, answer

    @classmethod
    def fork(cls, request_fd: int, answer_fd: int) -> _Spare:
        task_r, task_w = os.pipe()
        answer_r, answer_w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: wait for a request, parse it and answer, then leave without cleanup
            code = 0
            try:
                # the service's pipes stay the helper's alone: a waiting child must not keep the
                # service from seeing the helper's end (EOF) nor read its requests
                for fd in (task_w, answer_r, request_fd, answer_fd):
                    os.close(fd)
                _warm_up()
                with (
                    Connection(task_r, writable=False) as task,
                    Connection(answer_w, readable=False) as answer,
                ):
                    data, filename, timeout_s, memory_limit_bytes = task.recv()  # EOF: the helper is gone
                    answer.send(_parse_limited(data, filename, timeout_s, memory_limit_bytes))
            except BaseException:
                code = 1
            finally:
                os._exit(code)
        os.close(task_r)
        os.close(answer_w)
        return cls(pid, Connection(task_w, readable=False), Connection(answer_r, writable=False))

    def give(self, request: tuple[Any, ...]) -> bool:
        """Send the child its request; ``False`` (and the child reaped) when it is no longer there."""
        try:
            self.task.send(request)
        except OSError:
            self.close()
            return False
        return True

    def outcome(self, timeout_s: float) -> Outcome:
        """The child's answer within ``timeout_s`` (else it is killed); :meth:`reap` it after."""
        try:
            if not self.answer.poll(timeout_s):
                os.kill(self.pid, signal.SIGKILL)
                return ("timeout",)
            return self.answer.recv()
        except EOFError:  # the child died without answering
            _, status = os.waitpid(self.pid, 0)
            self.pid = 0
            if os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGXCPU:
                return ("timeout",)
            if os.WIFSIGNALED(status):
                return ("died", f"signal {signal.Signals(os.WTERMSIG(status)).name}")
            return ("died", f"exit status {os.WEXITSTATUS(status)}")

    def reap(self) -> None:
        """Wait for the child's exit (it has answered, died or been killed) and close its pipes."""
        self.close()

    def close(self) -> None:
        """End a child that got no request (it reads EOF and exits) and reap it."""
        self.task.close()
        self.answer.close()
        if self.pid:
            os.waitpid(self.pid, 0)
            self.pid = 0


def _address_space_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def _parse_limited(data: bytes, filename: str, timeout_s: float, memory_limit_bytes: int) -> Outcome:
    """In the child: lower the soft limits, parse, and answer with a plain tuple (no exceptions)."""
    _, hard_as = resource.getrlimit(resource.RLIMIT_AS)
    try:
        start = _address_space_bytes()
    except OSError:  # no /proc (macOS): the cap then counts the whole process
        start = 0
    cap = start + memory_limit_bytes
    if hard_as != resource.RLIM_INFINITY:
        cap = min(cap, hard_as)
    _, hard_cpu = resource.getrlimit(resource.RLIMIT_CPU)
    cpu_s = math.ceil(timeout_s) + _CPU_GRACE_S
    if hard_cpu == resource.RLIM_INFINITY or cpu_s <= hard_cpu:
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, hard_cpu))
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard_as))
    outcome: Outcome
    try:
        outcome = ("parsed", parse_document(data, filename, max_unpacked_bytes=memory_limit_bytes))
    except DocumentRejected as exc:
        outcome = ("rejected", exc.reason, exc.detail)
    except MemoryError:
        outcome = ("memory",)
    except Exception as exc:  # reported to the service as an unreadable file
        outcome = ("error", f"{type(exc).__name__}: {str(exc)[:200]}")
    resource.setrlimit(resource.RLIMIT_AS, (hard_as, hard_as))  # room to pickle the answer
    return outcome
