"""Network helpers for tests (loopback only): free ports, and a TCP proxy whose port can be closed."""

from __future__ import annotations

import asyncio
import socket
from types import TracebackType


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free a moment ago on ``host``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


class TcpProxy:
    """``async with TcpProxy(host, port) as proxy``: ``127.0.0.1:proxy.port`` forwards to ``host:port``
    until :meth:`close`, a real outage as a client sees it: every connection drops and the port is
    closed (new connections are refused). Runs in the test's event loop."""

    def __init__(self, host: str | None, port: int | None = None, *, unix_path: str | None = None) -> None:
        """Forward to ``host:port``, or to the Unix socket ``unix_path`` (the embedded PostgreSQL's)."""
        self.target = (host, port)
        self.unix_path = unix_path
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []
        self._tasks: set[asyncio.Task[None]] = set()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.unix_path is not None:
            upstream_reader, upstream_writer = await asyncio.open_unix_connection(self.unix_path)
        else:
            upstream_reader, upstream_writer = await asyncio.open_connection(*self.target)
        self._writers += [writer, upstream_writer]
        for task in (_pipe(reader, upstream_writer), _pipe(upstream_reader, writer)):
            self._tasks.add(asyncio.create_task(task))

    async def __aenter__(self) -> TcpProxy:
        await self.reopen()
        return self

    async def reopen(self) -> None:
        """Listen (again, on the same port after :meth:`close`): the outage is over."""
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        """The outage: close the listening port and cut every connection through it."""
        if self._server is not None:
            self._server.close()
            for writer in self._writers:
                writer.close()
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            await self._server.wait_closed()
            self._server = None
            self._writers.clear()
            self._tasks.clear()

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()
