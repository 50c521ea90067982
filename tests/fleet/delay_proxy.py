"""A user-space delay proxy in front of fleet hosts' sshd that COUNTS round trips per host
(benchmarks/latency_bench.py; tests/fleet/test_round_trips.py). This kernel has no netem.

Host i is reached through 127.0.0.1:ports[i]; each byte is held RTT/2 in each direction and a
TCP connect costs one RTT. A round trip, as counted: the connect, then every time the host
answers after the controller sent something since the host's last answer (a client that writes
several messages without waiting pays one). Counts do not depend on load; timings do.
"""

from __future__ import annotations

import asyncio
import socket
import threading


class DelayProxy:
    """127.0.0.1:port -> (address, port) of each host, RTT/2 each way, round trips counted."""

    def __init__(self, targets: dict[str, tuple[str, int]], rtt_ms: float) -> None:
        self.targets = targets
        self.delay = rtt_ms / 2000.0
        self.ports: dict[str, int] = {}
        self.trips: dict[str, int] = {name: 0 for name in targets}
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        threading.Thread(target=self._run, daemon=True, name="delay-proxy").start()
        self._ready.wait()

    def reset(self) -> None:
        self.trips = {name: 0 for name in self.targets}

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._listen())
        self._ready.set()
        self._loop.run_forever()

    async def _listen(self) -> None:
        for name, target in self.targets.items():
            server = await asyncio.start_server(
                lambda r, w, name=name, target=target: self._serve(name, target, r, w), "127.0.0.1", 0
            )
            self.ports[name] = server.sockets[0].getsockname()[1]

    async def _serve(self, name: str, target: tuple[str, int], reader, writer) -> None:
        self.trips[name] += 1  # the TCP handshake
        await asyncio.sleep(2 * self.delay)
        try:
            up_reader, up_writer = await asyncio.open_connection(*target)
        except OSError:
            writer.close()
            return
        for w in (writer, up_writer):
            sock = w.get_extra_info("socket")
            if sock is not None:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sent = [False]  # the controller sent something since the host's last answer

        def from_client() -> None:
            sent[0] = True

        def from_host() -> None:
            if sent[0]:
                self.trips[name] += 1
                sent[0] = False

        await asyncio.gather(
            self._pump(reader, up_writer, from_client), self._pump(up_reader, writer, from_host),
            return_exceptions=True,
        )  # fmt: skip
        for w in (writer, up_writer):
            w.close()

    async def _pump(self, reader, writer, seen) -> None:
        queue: asyncio.Queue = asyncio.Queue()
        loop = asyncio.get_running_loop()

        async def receive() -> None:
            while True:
                try:
                    data = await reader.read(1 << 16)
                except OSError:
                    data = b""
                if data:
                    seen()
                queue.put_nowait((loop.time() + self.delay, data))
                if not data:
                    return

        async def send() -> None:
            while True:
                due, data = await queue.get()
                wait = due - loop.time()
                if wait > 0:
                    await asyncio.sleep(wait)
                if not data:
                    try:
                        writer.write_eof()
                    except (OSError, RuntimeError):
                        pass
                    return
                writer.write(data)
                try:
                    await writer.drain()
                except OSError:
                    return

        await asyncio.gather(receive(), send())
