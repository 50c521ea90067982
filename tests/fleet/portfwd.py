"""A port-forwarding gateway for the fleet's `gateway`+`backnet` hosts (run in the gateway's
network namespace): LISTEN_ADDR:PORT -> TARGET:PORT for each `PORT=TARGET` argument, as a
rental's region gateway forwards one high port per instance to its private address.

    python3 portfwd.py 198.19.3.250 41001=198.19.9.2 41002=198.19.9.3

Prints "ready" once every port listens. Each connection is two threads copying bytes until
either side closes; the process lives as long as the fleet (PR_SET_PDEATHSIG kills it).
"""

from __future__ import annotations

import socket
import sys
import threading


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for sock in (src, dst):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def _serve(listener: socket.socket, target: tuple[str, int]) -> None:
    while True:
        client, _ = listener.accept()
        try:
            upstream = socket.create_connection(target, timeout=5)
            upstream.settimeout(None)
        except OSError:
            client.close()
            continue
        for a, b in ((client, upstream), (upstream, client)):
            threading.Thread(target=_pump, args=(a, b), daemon=True).start()


def main(argv: list[str]) -> int:
    addr, pairs = argv[0], argv[1:]
    threads = []
    for pair in pairs:
        port_text, target = pair.split("=")
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((addr, int(port_text)))
        listener.listen(128)
        threads.append(threading.Thread(target=_serve, args=(listener, (target, int(port_text))), daemon=True))
    for t in threads:
        t.start()
    print("ready", flush=True)
    threading.Event().wait()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
