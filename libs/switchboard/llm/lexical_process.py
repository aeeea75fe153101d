"""The offline lexical embedding of many texts in a helper process, off the service's GIL.

:func:`~switchboard.llm.lexical.lexical_embedding` is pure Python, about 1 ms of CPU for a 900-character
chunk. Run in a thread of a service (the background worker ingests up to ``max_jobs`` documents at
once, in the process that also runs its other jobs), it holds that process's GIL: the event loop waits
for it between its own steps, and a second core stays idle. :func:`embed_lexical` hands the texts to a
helper, a fresh interpreter (``python -c``, so the service's main module never runs again) that imports
only :mod:`switchboard.llm.lexical` (~0.2 s to start) and keeps its feature cache warm across requests;
the calling thread waits on a pipe without the GIL.

The vectors are the same floats to the last bit: the helper computes them with the same function and
sends them as IEEE-754 doubles (``array('d')``), which the caller reads back unchanged
(``tests/llm/test_lexical_process.py``). When no helper can be started or it dies mid-request, the
texts are embedded in the calling thread instead (logged once per failure): slower, never different.

One helper per service process, one request at a time (callers queue on a lock): on the 2-core
machine the benchmarks run on, one more core is what there is. It exits when the service exits
(its request pipe closes). Unix only (``pass_fds``).
"""

from __future__ import annotations

import array
import atexit
import os
import threading
from collections.abc import Sequence
from multiprocessing.connection import Connection

from switchboard.helper_process import start_helper
from switchboard.llm.lexical import lexical_embedding

__all__ = ["embed_lexical"]

_START_TIMEOUT_S = 60.0
"""How long a new helper may take to import :mod:`switchboard.llm.lexical` and say it is ready."""
_MS_PER_TEXT_LIMIT = 1_000
"""A request may take this many milliseconds a text (a 900-character chunk takes ~1 ms) before the
helper is taken for hung, killed, and the texts embedded in process."""


class _Helper:
    """The helper process and its two pipes (service side)."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.process, self.requests, self.answers = start_helper(
            "switchboard.llm.lexical_process", start_timeout_s=_START_TIMEOUT_S, what="embedding helper"
        )

    def embed(self, texts: list[str], dims: int) -> list[list[float]]:
        """The vectors of ``texts``; raises ``OSError``/``EOFError``/``TimeoutError`` when the helper fails."""
        self.requests.send((texts, dims))
        if not self.answers.poll(max(10.0, len(texts) * _MS_PER_TEXT_LIMIT / 1000)):
            raise TimeoutError("the embedding helper did not answer")
        flat = array.array("d")
        flat.frombytes(self.answers.recv_bytes())
        if len(flat) != len(texts) * dims:
            raise OSError(f"the embedding helper sent {len(flat)} floats for {len(texts)} x {dims}")
        return [flat[i * dims : (i + 1) * dims].tolist() for i in range(len(texts))]

    def close(self) -> None:
        self.requests.close()  # the helper exits when it reads EOF
        self.answers.close()
        self.process.kill()
        self.process.wait()


_lock = threading.Lock()
_helper: _Helper | None = None


def embed_lexical(texts: Sequence[str], dims: int = 1536) -> list[list[float]]:
    """``[lexical_embedding(t, dims) for t in texts]``, computed in the helper process. Blocking:
    call it with ``asyncio.to_thread`` (the wait on the helper releases the GIL).

    Args:
        texts: the texts, any number (one request: a whole batch).
        dims: vector width.

    Returns:
        One ``dims``-float vector per text, in order, equal to what :func:`lexical_embedding` returns.
        Embedded in the calling thread when the helper cannot be started or fails (never an error).
    """
    global _helper
    if not texts:
        return []
    from switchboard.observability import get_logger

    with _lock:
        try:
            if _helper is None or _helper.pid != os.getpid():  # none yet, or inherited by a fork
                _helper = _Helper()
            return _helper.embed(list(texts), dims)
        except (OSError, EOFError, TimeoutError) as exc:
            get_logger(__name__).warning(
                "lexical_embedding_helper_failed", error=f"{type(exc).__name__}: {exc}", texts=len(texts)
            )
            if _helper is not None:
                _helper.close()
                _helper = None
    return [lexical_embedding(text, dims) for text in texts]


def _close() -> None:
    if _helper is not None and _helper.pid == os.getpid():
        _helper.close()


atexit.register(_close)


def _serve(request_fd: int, answer_fd: int) -> None:
    """The helper's loop: ``(texts, dims)`` in, the vectors as one ``array('d')`` of bytes out."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C of `switchboard run` stops the service; we follow
    requests = Connection(request_fd, writable=False)
    answers = Connection(answer_fd, readable=False)
    answers.send(("ready",))
    while True:
        try:
            texts, dims = requests.recv()
        except EOFError:  # the service closed the pipe or exited
            return
        flat = array.array("d")
        for text in texts:
            flat.extend(lexical_embedding(text, dims))
        answers.send_bytes(flat)
