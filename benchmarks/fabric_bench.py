#!/usr/bin/env python3
"""Fabric benchmark: how long choosing where the hosts meet takes (select_fabric: the ranking
from facts plus the TCP probes from every host to the master through each host's agent), next
to what it replaces by hand (one `ssh HOST nc -z MASTER PORT`-style check per host, here the
same TCP connect run over SSH with python3), on `backnet` fleet hosts.

    sudo python3 benchmarks/fabric_bench.py                 # 2, 4 and 8 hosts, 5 repeats
    sudo python3 benchmarks/fabric_bench.py --sizes 4 --repeats 3

Connections are opened and facts gathered once per fleet (what `provision train --distributed`
and `bench --allreduce` have anyway); each repeat times only the choice. Medians reported. The
"by hand" column runs, in parallel, one ssh command per non-master host that connects to a
listener the master's ssh session holds open until every peer came; it checks less (no free-port search, no token,
no fallback) and is the floor the probes are compared against.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests" / "fleet")]

from fleet import Fleet  # noqa: E402

from provision.connection.base import ConnectOptions  # noqa: E402
from provision.connection.ssh import SSHConnection  # noqa: E402
from provision.distributed.fabric import select_fabric  # noqa: E402
from provision.remote.agent import Agent  # noqa: E402
from provision.remote.facts import gather_facts  # noqa: E402
from provision.shell import sh  # noqa: E402

LISTEN = ("import socket,sys; s=socket.socket(); s.bind(('0.0.0.0', int(sys.argv[1]))); s.listen(); s.settimeout(10)\n"
          "for _ in range(int(sys.argv[2])): s.accept()[0].close()")
CONNECT = "import socket,sys; socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3).close()"


def by_hand(conns: list[SSHConnection], master_addr: str, port: int) -> float:
    started = time.monotonic()
    listen = sh("python3 -c {c} {p} {n}", c=LISTEN, p=str(port), n=str(len(conns) - 1))
    holder = threading.Thread(target=conns[0].run, args=(listen,), kwargs={"timeout": 20}, daemon=True)
    holder.start()
    time.sleep(0.3)  # the listener's interpreter start; counted, as a person would wait too
    results: list[int] = []
    threads = [threading.Thread(target=lambda c=c: results.append(
        c.run(sh("python3 -c {c} {a} {p}", c=CONNECT, a=master_addr, p=str(port)), timeout=20).exit_code))
        for c in conns[1:]]  # fmt: skip
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    holder.join(30)  # the listener ends after the last peer: the connection is free again
    if any(results):
        raise SystemExit(f"a by-hand check failed: {results}")
    return time.monotonic() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="2,4,8")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    config = Path(tempfile.mkdtemp()) / "ssh_config"
    config.write_text("")
    options = ConnectOptions(known_hosts="off", connect_timeout=5.0, ssh_config=str(config))
    print(f"{'hosts':>5} | {'select_fabric (median)':>22} | {'by hand, ssh + connect':>22} | probe ms (median)")
    for size in (int(s) for s in args.sizes.split(",")):
        with Fleet(size, kinds="backnet") as fleet:
            conns = [SSHConnection(h.as_host(), options) for h in fleet.hosts]
            try:
                agents = {c.host.name: Agent(c) for c in conns}
                facts = {name: gather_facts(agent) for name, agent in agents.items()}
                select_fabric(agents, facts)  # warm-up: the agent's first start on each host
                times, manual, probe_ms = [], [], []
                for _ in range(args.repeats):
                    started = time.monotonic()
                    fabric = select_fabric(agents, facts)
                    times.append(time.monotonic() - started)
                    probe_ms += [p["ms"] for p in fabric.probes]
                    manual.append(by_hand(conns, fabric.master_addr, fabric.master_port))
            finally:
                for c in conns:
                    c.close()
        print(f"{size:>5} | {statistics.median(times):>20.2f} s | {statistics.median(manual):>20.2f} s | "
              f"{statistics.median(probe_ms):.1f}", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
