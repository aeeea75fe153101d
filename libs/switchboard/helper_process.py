"""Start a helper interpreter that serves requests over two pipes (the parse and embedding helpers).

The helper is a fresh ``python -c`` (so the service's own main module never runs again) that imports
only ``module`` and calls ``module._serve(request_fd, answer_fd)``; ``_serve`` sends ``("ready",)``
once its imports are done. Requests and answers are :class:`multiprocessing.connection.Connection`
messages. The helper exits when it reads EOF on its request pipe, i.e. when the service closes it or
exits. Unix only (``pass_fds``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from multiprocessing.connection import Connection

__all__ = ["start_helper"]


def start_helper(
    module: str, *, start_timeout_s: float, what: str
) -> tuple[subprocess.Popen[bytes], Connection, Connection]:
    """Start the helper of ``module`` and wait until it is ready.

    Args:
        module: importable module with a ``_serve(request_fd: int, answer_fd: int)`` function.
        start_timeout_s: how long its imports may take (they never count against a request's timeout).
        what: its name in the error (``"parse helper"``).

    Returns:
        ``(process, requests, answers)``: send requests on the second, receive answers on the third.

    Raises:
        OSError: it did not say ``("ready",)`` within ``start_timeout_s`` (it is killed and reaped).
    """
    request_r, request_w = os.pipe()
    answer_r, answer_w = os.pipe()
    code = f"from {module} import _serve; _serve({request_r}, {answer_w})"
    process = subprocess.Popen(
        [sys.executable, "-c", code], pass_fds=(request_r, answer_w), stdin=subprocess.DEVNULL
    )
    os.close(request_r)
    os.close(answer_w)
    requests = Connection(request_w, readable=False)
    answers = Connection(answer_r, writable=False)
    try:
        if not answers.poll(start_timeout_s) or answers.recv() != ("ready",):
            raise OSError(f"the {what} did not start")
    except (OSError, EOFError) as exc:
        requests.close()
        answers.close()
        process.kill()
        process.wait()
        raise OSError(f"the {what} did not start") from exc
    return process, requests, answers
