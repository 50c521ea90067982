"""Plays × hosts: the runner.

Hosts run in parallel (at most `forks` at once), each through its own tasks in order over its
one connection (the "free" strategy: a fast host never waits for a slow one). Coordination is
only where the semantics need it: `run_once` (the first host runs, the others take its result),
`any_errors_fatal` and `meta: end_play` (every host stops before its next task), Ctrl-C (every
host stops before its next task; the recap shows what ran). Handlers run once per host at the
end of each section (pre_tasks, roles + tasks, post_tasks) when notified, in the order they are
defined. A host that fails stops; the others go on. Failed hosts sit out later plays.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

from provision.config import load_config
from provision.connection.base import Connection, ConnectOptions, interrupt_all
from provision.engine.async_jobs import JOBS
from provision.engine.dynamic_inventory import add_dynamic_group, add_dynamic_host, refresh_groups
from provision.engine.host_play import _HostPlay
from provision.engine.play_setup import batches, prompt_values
from provision.engine.playbook import (
    Include,
    Node,
    Play,
    Playbook,
    PlaybookError,
    find_runtime_tasks_file,
    load_playbook,
    load_role_at_runtime,
    load_tasks_at_runtime,
)
from provision.engine.playbook_model import public_roles
from provision.engine.results import HostStats, PlaybookResult, TaskResult
from provision.engine.role_names import play_roles
from provision.engine.run_state import HostRuntime, RunOptions, Stop, _PlayState, tags_selected
from provision.engine.templating import (
    Templar,
    TemplateError,
)
from provision.engine.variables import VariableManager
from provision.errors import (
    ConfigError,
)
from provision.inventory.loader import load_inventory
from provision.inventory.model import Host, Inventory
from provision.inventory.patterns import UnknownPatternError, select_hosts
from provision.parallel import STOP_GRACE_S
from provision.secrets import Masker, collect_secrets
from provision.yamlpos import load_yaml

__all__ = [
    "NullDisplay",
    "PlaybookRunner",
    "RunOptions",
    "Stop",
    "inventory_from_hosts",
    "run_playbook",
    "tags_selected",
]


class NullDisplay:
    """Display interface (see display.py); the API default prints nothing."""

    def play_start(self, play: Play, hosts: list[Host]) -> None: ...
    def task_start(self, host: str, task: str) -> None: ...
    def task_result(self, result: TaskResult, full: dict[str, Any]) -> None: ...
    def item_result(
        self, host: str, task: str, label: str, result: dict[str, Any], action: str = ""
    ) -> None: ...
    def host_done(self, host: str) -> None: ...
    def message(self, text: str) -> None: ...
    def start(self) -> None: ...
    def stop(self) -> None: ...


class PlaybookRunner:
    def __init__(
        self,
        playbook: Playbook,
        inventory: Inventory,
        options: RunOptions,
        display: Any = None,
        connections: Mapping[str, Connection] | None = None,
    ) -> None:
        self.playbook = playbook
        self.inventory = inventory
        self.options = options
        self.display = display or NullDisplay()
        self.connections = connections
        self.playbook_dir = playbook.base_dir
        self.templar = Templar(bool(load_config().allow_broken_conditionals))
        self.vm = VariableManager(
            inventory, options.extra_vars, self.playbook_dir, options.check, options.diff
        )
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.result = PlaybookResult(playbook=str(playbook.path), check_mode=options.check)
        self.runtimes: dict[str, HostRuntime] = {}
        self.masker = Masker(collect_secrets([options.extra_vars]))
        self._include_cache: dict[tuple[int, str], list[Node]] = {}
        self.include_paths: dict[tuple[int, str], str] = {}  # the file each include loaded

    # -- shared bookkeeping --------------------------------------------------------------------
    def record(self, result: TaskResult, full: dict[str, Any]) -> None:
        with self.lock:
            self.result.results.append(result)
            self.result.recap.setdefault(result.host, HostStats())
        self.display.task_result(result, full)

    def change_inventory(self, host: Host, result: dict[str, Any]) -> bool:
        """add_host / group_by: the shared inventory changes for the later plays."""
        with self.lock:
            if "add_host" in result:
                changed = add_dynamic_host(self.inventory, result["add_host"])
            else:
                changed = add_dynamic_group(
                    self.inventory, host, result["add_group"], result["parent_groups"]
                )
            self.vm.groups = refresh_groups(self.inventory)
        return changed

    def refresh_inventory(self) -> None:
        """meta: refresh_inventory: the inventory files are read again; hosts, groups and group
        vars they now have join the run's inventory for the following plays (hosts the run
        already knows keep their connection settings)."""
        if not self.inventory.sources:
            return  # hosts given on the command line: nothing to read again
        fresh = load_inventory(list(self.inventory.sources), str(self.playbook_dir))
        with self.lock:
            inv = self.inventory
            for name, host in fresh.hosts.items():
                inv.hosts.setdefault(name, host)
                inv.host_vars.setdefault(name, fresh.host_vars.get(name, {}))
            for group, members in fresh.groups.items():
                known = inv.groups.setdefault(group, [])
                known += [m for m in members if m not in known]
            for group, kids in fresh.children.items():
                known = inv.children.setdefault(group, [])
                known += [k for k in kids if k not in known]
            for group, values in fresh.group_vars.items():
                inv.group_vars[group] = {**inv.group_vars.get(group, {}), **values}
            self.vm.groups = refresh_groups(inv)

    def note_run_once(self, host: str) -> None:
        with self.lock:
            self.result.recap.setdefault(host, HostStats())

    def include_cache(self, node: Include, file: str) -> list[Node]:
        key = (node.id, file)
        with self.lock:
            cached = self._include_cache.get(key)
        if cached is not None:
            return cached
        path = find_runtime_tasks_file(file, node, self.playbook_dir)
        nodes = load_tasks_at_runtime(path, node.inherit, self.playbook_dir)
        with self.lock:
            self._include_cache[key] = nodes
            self.include_paths[key] = str(path)
        return nodes

    def role_include_cache(self, node: Include, rendered: Mapping[str, str], play: Any) -> Node:
        """include_role with templated names: loaded once per rendered names; the role's
        handlers join the play's, as Ansible adds a dynamically included role's."""
        key = (node.id, repr(sorted(rendered.items())))
        with self.lock:
            cached = self._include_cache.get(key)
        if cached is not None:
            return cached[0]
        block = load_role_at_runtime(node, rendered, self.playbook_dir)
        with self.lock:
            self._include_cache[key] = [block]
            if block.role is not None:
                known = {id(h) for h in play.handlers}
                play.handlers.extend(h for h in block.role.handlers if id(h) not in known)
        return block

    def runtime(self, host: Host) -> HostRuntime:
        rt = self.runtimes.get(host.name)
        if rt is None:
            rt = HostRuntime(
                host,
                self.options.connect,
                self.vm.state(host),
                self.connections,
                playbook_dir=str(self.playbook_dir),
            )
            self.runtimes[host.name] = rt
            self.masker.add(collect_secrets([host.vars]))
        return rt

    # -- plays ---------------------------------------------------------------------------------
    def select(self, play: Play) -> list[Host]:
        try:
            hosts = select_hosts(self.inventory, play.hosts, limit=self.options.limit)
        except UnknownPatternError as exc:
            # as Ansible: a play whose pattern matches nothing is skipped, with a warning
            self.display.message(f"play '{play.name}' ({play.pos}): {exc}; skipping the play")
            return []
        return [
            h
            for h in hosts
            if not (
                h.name in self.runtimes
                and (self.runtimes[h.name].failed or self.runtimes[h.name].unreachable)
            )
        ]

    def play_vars(self, play: Play, rt: HostRuntime) -> dict[str, Any]:
        merged = dict(play.vars)
        for file, pos in play.vars_files:
            name = file
            if "{{" in file:
                name = str(self.templar.render_path(file, self.vm.task_vars(rt.vars), "vars_files"))
            path = Path(name).expanduser()
            path = path if path.is_absolute() else play.base_dir / path
            data = load_yaml(path)
            if data is None:
                continue
            if not isinstance(data, Mapping):
                raise ConfigError(f"{pos}: vars file {name} must hold a mapping")
            merged.update(data)
        return merged

    def run(self) -> PlaybookResult:
        start = time.monotonic()
        self.display.start()
        try:
            for play in self.playbook.plays:
                if self.stop.is_set():
                    break
                self.run_play(play)
        except KeyboardInterrupt:
            self.interrupt()
        finally:
            JOBS.forget()  # `poll: 0` jobs end with the run (engine/async_jobs.py)
            for rt in self.runtimes.values():
                rt.close()
            self.result.elapsed = time.monotonic() - start
            self.result.recap = self.recap()
            self.display.stop()
        return self.result

    def recap(self) -> dict[str, HostStats]:
        stats: dict[str, HostStats] = {name: HostStats() for name in self.result.recap}
        for res in self.result.results:
            stats.setdefault(res.host, HostStats()).add(res)
        return stats

    def interrupt(self) -> None:
        self.stop.set()
        self.result.interrupted = True

    def run_play(self, play: Play) -> None:
        hosts = self.select(play)
        try:
            prompted = prompt_values(play.vars_prompt, self.options.extra_vars)
            groups = batches(hosts, play.serial, str(play.pos))
        except ConfigError as exc:
            raise PlaybookError([str(exc)]) from None
        if not hosts:
            self.vm.play_hosts = []
            self.display.play_start(play, hosts)
            return
        for batch in groups:  # serial: one batch after the other; else one batch of all
            alive = [h for h in batch if h in self.select(play)] if len(groups) > 1 else batch
            if self.stop.is_set() or not alive:
                continue
            pstate = self.run_batch(play, alive, prompted)
            if pstate.end_play or (pstate.abort.is_set() and not pstate.batch_ended):
                break  # end_play / any_errors_fatal: no later batches

    def run_batch(self, play: Play, hosts: list[Host], prompted: dict[str, Any]) -> _PlayState:
        self.vm.play_hosts = [h.name for h in hosts]
        self.display.play_start(play, hosts)
        pstate = _PlayState(play, hosts)
        runtimes = [self.runtime(h) for h in hosts]
        exposed = public_roles(play)
        self.vm.set_play_roles(play_roles(play))
        for rt in runtimes:
            with self.lock:
                self.result.recap.setdefault(rt.host.name, HostStats())
            try:
                rt.vars.play_vars = {**self.play_vars(play, rt), **prompted}
                rt.vars.expose_roles(exposed, reset=True)
            except (ConfigError, TemplateError) as exc:
                raise PlaybookError([str(exc)]) from None
            self.masker.add(collect_secrets([rt.vars.play_vars]))

        last_play = play is self.playbook.plays[-1]

        def work(rt: HostRuntime) -> None:
            try:
                _HostPlay(self, rt, pstate).run()
            except (KeyboardInterrupt, PlaybookError):
                raise
            except Exception as exc:  # a bug must cost this host, not the whole run
                rt.failed = True
                self.record(
                    TaskResult(
                        host=rt.host.name,
                        task="(internal error)",
                        play=play.name,
                        action="",
                        status="failed",
                        msg=f"{type(exc).__name__}: {exc}",
                        position=str(play.pos),
                    ),
                    {},
                )
            finally:
                self.display.host_done(rt.host.name)
                if last_play:
                    # nothing will run on this host again: free its connection (socket, transport
                    # and watchdog threads, the host's sshd session) while the others still run
                    # (128 hosts at -f 32 held 128 connections to the end)
                    rt.close()

        if len(runtimes) == 1:
            try:
                work(runtimes[0])
            except KeyboardInterrupt:
                self.interrupt()
            return pstate
        pool = ThreadPoolExecutor(
            max_workers=max(1, min(self.options.forks, len(runtimes))), thread_name_prefix="host"
        )
        futures: list[Future[None]] = [pool.submit(work, rt) for rt in runtimes]
        try:
            pending = set(futures)
            while pending:
                _, pending = wait(pending, timeout=0.2, return_when=FIRST_COMPLETED)
        except KeyboardInterrupt:
            # stop within ~2 s even with hung hosts: every running command ends its remote
            # process group and raises; hosts that don't answer in time are left behind
            self.interrupt()
            interrupt_all()
            self.display.message("interrupted: stopping the running steps")
            try:
                wait(futures, timeout=STOP_GRACE_S)
            except KeyboardInterrupt:
                pass
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
        for future in futures:
            exc = future.exception() if future.done() and not future.cancelled() else None
            if exc is not None and not isinstance(exc, (Stop, KeyboardInterrupt)):
                raise exc
        return pstate


def inventory_from_hosts(hosts: list[Host]) -> Inventory:
    inventory = Inventory()
    inventory.groups["all"] = []
    for host in hosts:
        inventory.hosts[host.name] = host
        inventory.groups["all"].append(host.name)
        for group in host.groups:
            if group != "all":
                inventory.groups.setdefault(group, [])
                if host.name not in inventory.groups[group]:
                    inventory.groups[group].append(host.name)
    return inventory


def run_playbook(
    path: str | Path | Playbook,
    inventory: Inventory | None = None,
    *,
    hosts: list[Host] | None = None,
    extra_vars: Mapping[str, Any] | None = None,
    options: ConnectOptions | None = None,
    check: bool = False,
    diff: bool = False,
    forks: int = 32,
    limit: str | None = None,
    tags: list[str] | frozenset[str] | None = None,
    skip_tags: list[str] | frozenset[str] | None = None,
    display: Any = None,
    connections: Mapping[str, Connection] | None = None,
) -> PlaybookResult:
    """Run a playbook: the Python API behind `provision run` (and `provision up`).

    `hosts` (a list of Host) or `inventory` says what the plays' `hosts:` patterns select from;
    with neither, the implicit `localhost` is available. `connections` lends already-open
    connections by host name (closed by their owner, not here). Raises PlaybookError (a
    ConfigError) for an invalid playbook before anything runs.
    """
    playbook = path if isinstance(path, Playbook) else load_playbook(path)
    if inventory is None:
        inventory = inventory_from_hosts(list(hosts or []))
    elif hosts is not None:
        names = [h.name for h in hosts]
        limit = ",".join(names) if limit is None else limit
    if limit:
        if not select_hosts(inventory, "all", limit=limit):  # a typo is an error, not a no-op run
            raise ConfigError(f"--limit {limit!r} selects no hosts")
    run_options = RunOptions(
        forks=forks,
        check=check,
        diff=diff,
        tags=frozenset(tags or ()),
        skip_tags=frozenset(skip_tags or ()),
        limit=limit,
        connect=options or ConnectOptions(),
        extra_vars=dict(extra_vars or {}),
    )
    return PlaybookRunner(
        playbook, inventory, run_options, display=display, connections=connections
    ).run()
