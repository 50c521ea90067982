"""`train`: run a training command on the host detached (docs/train.md), as `provision train`.

    - name: train
      train:
        command: [python, train.py, --epochs, "3"]
        dir: code/                 # controller folder shipped (.gitignore honoured); omit: no code
        python: "{{ torch.python }}"   # default: the managed env's python
        env: {WANDB_MODE: offline}
        detach: false              # true: start and go on; the run survives the play
        stop_when_idle: 30m        # needs the host's stop_command var
        out: reports/              # write the report (JSON/Markdown/HTML) there
      register: job

`job.run` is the entry `provision train --json` prints for the host (run_id, state, exit_code,
seconds, workdir, log, profile, findings, report); a failed run fails the task.

    - name: one job across the play's hosts (torchrun; docs/train.md "Distributed")
      train:
        command: [python, train.py]
        dir: code/
        distributed: true
        nproc_per_node: auto       # or a number; auto: one per GPU, 1 without GPUs
        master: gpu1:29500         # default: the play's first host, a free port
        iface: ib0                 # default: chosen from the hosts' network facts
        allreduce: true            # measure the all-reduce bandwidth first
      register: job

With `distributed: true` every host of the play (ansible_play_hosts) takes part in ONE run: each
host's task joins a meeting point (provision/train/gang.py); the play's first host leads, starts
torchrun everywhere over its own connections once every host has joined (at most
`join_timeout` seconds; --forks must be at least the number of hosts), follows the job and
writes the reports; every host's task then reports its own part: `job.run` (its entry) and
`job.distributed` (the whole run: fabric, all-reduce, findings). The task fails on every host
when any rank failed.
"""

from __future__ import annotations

from typing import Any

from provision.errors import AgentError, ConfigError
from provision.modules.base import Arg, Module, ModuleFailure, ModuleResult, TaskContext, register


@register
class Train(Module):
    name = "train"
    args = {
        "command": Arg("list", required=True, aliases=("cmd",)),
        "dir": Arg("str"),
        "workdir": Arg("str"),
        "python": Arg("str"),
        "env": Arg("dict", default={}),
        "detach": Arg("bool", default=False),
        "instrument": Arg("bool", default=True),
        "sample_interval": Arg("float", default=1.0),
        "stop_when_idle": Arg("str"),
        "run_id": Arg("str"),
        "out": Arg("str"),
        "max_code_size_mb": Arg("float", default=256.0),
        "distributed": Arg("bool", default=False),
        "nproc_per_node": Arg("str"),
        "master": Arg("str"),
        "iface": Arg("str"),
        "allreduce": Arg("bool", default=True),
        "grad_mb": Arg("float"),
        "join_timeout": Arg("float", default=300.0),
    }
    supports_check_mode = False  # starting a job is the whole point: skipped in --check

    def run(self, ctx: TaskContext) -> ModuleResult:
        # start-up time: a playbook loads every module; the train stack only when this one runs
        from provision.train.gang import GangError
        from provision.train.launch import (
            HostTrainer,
            TrainSpec,
            new_run_id,
        )
        from provision.train.options import (
            parse_duration,
            stop_command_hint,
        )
        from provision.train.report import run_entry

        a = ctx.args
        code_dir = None
        if a.get("dir"):
            code_dir = str(ctx.find_file(str(a["dir"]), "files"))
        try:
            spec = TrainSpec(
                command=[str(c) for c in a["command"]], code_dir=code_dir, workdir=a.get("workdir"),
                python=a.get("python"), env={str(k): str(v) for k, v in (a.get("env") or {}).items()},
                instrument=a["instrument"], interval=float(a["sample_interval"]),
                stop_when_idle=parse_duration(a["stop_when_idle"], "stop_when_idle") if a.get("stop_when_idle") else None,
                max_code_bytes=int(float(a["max_code_size_mb"]) * 1e6),
                run_id=a.get("run_id") or new_run_id(), hosts=[ctx.host.name],
            )
            trainer = HostTrainer(ctx.connection, ctx.agent, dict(ctx.facts) if ctx.facts.get("data_dir") else None)
            if a["distributed"]:
                return self._distributed(ctx, spec, trainer)
            if spec.stop_when_idle is not None:
                spec.stop_command = str(ctx.vars.get("stop_command") or ctx.host.vars.get("stop_command") or "")
                if not spec.stop_command:
                    raise ModuleFailure(stop_command_hint(ctx.host.name, trainer.facts))
            started = trainer.start(spec)
            run = started["run"]
            if ctx.on_progress:
                ctx.on_progress(f"train {run['run_id']} {run['state']}")
            if a["detach"]:
                entry = run_entry(run, None, [], None)
                return ModuleResult(changed=True, msg=f"run {run['run_id']} started in {run['workdir']}",
                                    data={"run": entry})
            final = trainer.follow_to_end(run["run_id"])
            entry = self._finish(trainer, final, a.get("out"))
        except (AgentError, ConfigError, GangError) as exc:
            raise ModuleFailure(f"train: {exc}") from None
        failed = entry["state"] != "finished"
        msg = f"run {entry['run_id']} {entry['state']} (exit code {entry['exit_code']})"
        return ModuleResult(changed=True, failed=failed, msg=msg, rc=entry["exit_code"], data={"run": entry})

    def _finish(self, trainer: Any, final: dict[str, Any], out: str | None) -> dict[str, Any]:
        # start-up time: a playbook loads every module; the train stack only when this one runs
        from provision.train.diagnosis import diagnose_run
        from provision.train.report import (
            build_document,
            run_entry,
            write,
        )

        summary = trainer.summary(final["run_id"])
        findings = diagnose_run(summary, trainer.facts, None, trainer.host)
        paths = None
        if out:
            # start-up time: a playbook loads every module; the train stack only when this one runs
            from provision.report import history

            doc = build_document(trainer.host, summary["run"], summary, findings, trainer.facts)
            paths = write(doc, out)
            history.record(doc)
        return run_entry(summary["run"], summary, findings, paths)

    def _distributed(self, ctx: TaskContext, spec: Any, trainer: Any) -> ModuleResult:
        from provision.train.cluster import (  # start-up time: a playbook loads every module; the train stack only when this one runs
            ClusterTrainer,
            finish_run,
        )
        from provision.train.distributed import (
            DistributedOptions,
            parse_nproc,
        )
        from provision.train.gang import gang_for

        a = ctx.args
        names = [str(n) for n in (ctx.vars.get("ansible_play_hosts") or [ctx.host.name])]
        if spec.stop_when_idle is not None:
            raise ModuleFailure("train: stop_when_idle is not supported with distributed: true")
        options = DistributedOptions(
            nproc_per_node=parse_nproc(a.get("nproc_per_node")), master=a.get("master"), iface=a.get("iface"),
            allreduce=a["allreduce"], grad_bytes=int(float(a["grad_mb"]) * 1e6) if a.get("grad_mb") else None)
        key = f"{ctx.task_name}\0{a.get('run_id') or ''}"
        gang = gang_for(key, names)

        def lead(members: dict[str, Any]) -> dict[str, Any]:
            hosts = [members[n][0] for n in names]
            cluster = ClusterTrainer(hosts, {n: members[n][1] for n in names}, spec, options)
            cluster.prepare()
            if options.allreduce and len(hosts) > 1:
                cluster.measure_allreduce()
            cluster.start(None)
            if a["detach"]:
                # start-up time: a playbook loads every module; the train stack only when this one runs
                from provision.train.report import run_entry

                return {"runs": {n: run_entry(s["run"], None, [], None) for n, s in cluster.started.items()},
                        "distributed": cluster.distributed_section()}
            outcomes = cluster.follow(lambda host, lines: None)
            return finish_run(cluster, {n: o.value for n, o in outcomes.items() if o.ok}, a.get("out"))

        doc = gang.run(ctx.host.name, (ctx.host, trainer), lead, float(a["join_timeout"]))
        entry = doc["runs"].get(ctx.host.name) or {"error": "no result for this host"}
        if "error" in entry:
            raise ModuleFailure(f"train: {entry['error']}")
        everyone = [e.get("state") for e in doc["runs"].values()]
        failed = any(s in ("failed", "stopped") for s in everyone) or "error" in str(everyone)
        msg = (f"run {entry['run_id']} {entry['state']} on {ctx.host.name} "
               f"(node {names.index(ctx.host.name)} of {len(names)})")
        return ModuleResult(changed=True, failed=failed, msg=msg, rc=entry.get("exit_code"),
                            data={"run": entry, "distributed": doc.get("distributed")})
