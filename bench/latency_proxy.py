"""A TCP proxy that adds a fixed one-way delay to every byte in both directions, for
benchmarking a loopback registry as if it were across a network (``image_bench.py --rtt-ms``).

Throughput is not limited: each direction is a pipeline (data read at time t is written at
t + delay), so only round trips cost. Bench-only; listens on 127.0.0.1.

    python bench/latency_proxy.py LISTEN_PORT UPSTREAM_HOST UPSTREAM_PORT ONE_WAY_MS
"""

from __future__ import annotations

import asyncio
import contextlib
import sys


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

    async def read() -> None:
        while data := await reader.read(65536):
            await queue.put((loop.time() + delay, data))
        await queue.put((loop.time() + delay, b""))

    async def write() -> None:
        while True:
            due, data = await queue.get()
            await asyncio.sleep(max(0.0, due - loop.time()))
            if not data:
                with contextlib.suppress(OSError):
                    writer.write_eof()
                return
            writer.write(data)
            await writer.drain()

    with contextlib.suppress(OSError, asyncio.IncompleteReadError):
        await asyncio.gather(read(), write())


async def _serve(listen: int, host: str, port: int, delay: float) -> None:
    async def handle(c_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter) -> None:
        try:
            u_reader, u_writer = await asyncio.open_connection(host, port)
        except OSError:
            c_writer.close()
            return
        await asyncio.gather(_pump(c_reader, u_writer, delay), _pump(u_reader, c_writer, delay))
        for w in (c_writer, u_writer):
            w.close()

    server = await asyncio.start_server(handle, "127.0.0.1", listen)
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    listen, host, port, ms = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    asyncio.run(_serve(listen, host, port, ms / 1000))
