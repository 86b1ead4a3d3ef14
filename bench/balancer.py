"""A loopback TCP load balancer: each new connection goes to the next backend, round robin.

Bytes are copied both ways as they arrive (no HTTP parsing, no buffering), so SSE streams pass
through chunk by chunk, as behind nginx with `proxy_buffering off` (jin also sends
`X-Accel-Buffering: no`). Balancing is per connection, as nginx's `stream` module does it: a
keep-alive connection stays on its backend.

    python -m bench.balancer --port 8080 http://127.0.0.1:8001 http://127.0.0.1:8002
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
from urllib.parse import urlsplit

CHUNK = 64 * 1024


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy until EOF, then pass the half-close on (the other direction may still be busy)."""
    while data := await reader.read(CHUNK):
        writer.write(data)
        await writer.drain()
    if writer.can_write_eof():
        writer.write_eof()


async def _close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()


class Balancer:
    def __init__(self, backends: list[tuple[str, int]]) -> None:
        self._next = itertools.cycle(backends)
        # The loop holds tasks weakly, and a stream's protocol holds its reader weakly: once a
        # client has half-closed, nothing else keeps a connection's tasks alive, and the garbage
        # collector would destroy them mid-answer.
        self._handlers: set[asyncio.Task[None]] = set()

    async def handle(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._handlers.add(task)
        try:
            await self._relay(client_r, client_w)
        finally:
            self._handlers.discard(task)

    async def _relay(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        host, port = next(self._next)
        try:
            backend_r, backend_w = await asyncio.open_connection(host, port)
        except OSError:
            await _close(client_w)  # the client sees a reset connection, as from a proxy
            return
        pipes = [asyncio.create_task(_pipe(client_r, backend_w)),
                 asyncio.create_task(_pipe(backend_r, client_w))]
        try:
            # Both directions run to their EOF; one failing (a reset) ends the other too.
            await asyncio.wait(pipes, return_when=asyncio.FIRST_EXCEPTION)
        finally:
            for pipe in pipes:
                pipe.cancel()
            await asyncio.gather(*pipes, return_exceptions=True)
            await asyncio.gather(_close(backend_w), _close(client_w))

    async def serve(self, port: int, host: str = "127.0.0.1") -> asyncio.Server:
        return await asyncio.start_server(self.handle, host, port)


def backend_address(url: str) -> tuple[str, int]:
    parts = urlsplit(url if "//" in url else f"//{url}")
    if parts.hostname is None or parts.port is None:
        raise ValueError(f"a backend needs a host and a port: {url}")
    return parts.hostname, parts.port


async def _main(port: int, backends: list[str]) -> None:
    server = await Balancer([backend_address(b) for b in backends]).serve(port)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("backends", nargs="+", help="http://host:port of each backend")
    args = parser.parse_args()
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(_main(args.port, args.backends))


if __name__ == "__main__":
    main()
