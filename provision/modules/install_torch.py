"""`install_torch`: the matched PyTorch build in a managed env, verified on the host.

The same code path as `provision install` (provision/install/installer.py): build aside, verify,
switch; a rerun with the same arguments changes nothing. Check mode plans and compares only.

    - name: torch for this host
      install_torch:
        torch: "2.5"
        with: [torchvision]
        packages: [numpy]
        mirror: tuna
      register: torch_env        # torch_env.python is the env's interpreter
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from provision.errors import ConfigError
from provision.modules.base import Arg, Module, ModuleFailure, ModuleResult, TaskContext, register

if TYPE_CHECKING:
    from provision.install.installer import InstallError


@register
class InstallTorch(Module):
    name = "install_torch"
    args = {
        "torch": Arg("str", default="latest", aliases=("version",)),
        "variant": Arg("str"),
        "with": Arg("list", default=[], elements="str"),
        "packages": Arg("list", default=[], elements="str", aliases=("extra", "extras")),
        "requirements": Arg("list", default=[], elements="path"),
        "env": Arg("str"),
        "python": Arg("str"),
        "conda": Arg("str"),
        "mirror": Arg("str"),
        # a URL is shown (messages name the index); its userinfo password (user:TOKEN@) is
        # masked everywhere, as in any argument (secret_arg_values → secrets.url_passwords)
        "index_url": Arg("str"),
        "extra_index_urls": Arg("list", default=[], elements="str"),
        "find_links": Arg("list", default=[], elements="str"),
        "trusted_hosts": Arg("list", default=[], elements="str"),
        "proxy": Arg("str", no_log=True),
        "network_turbo": Arg("bool", default=False),
        "relay": Arg("bool", default=False),
        "locked": Arg("path"),
        "minor_version_compat": Arg("bool", default=True),
        "pip_timeout": Arg("float", default=30.0),
        "keep_base": Arg("bool", default=False),
        "allow_cuda_build_on_cpu": Arg("bool", default=False),
        # false: when no torch build fits the host, say why and go on (changed=false)
        "required": Arg("bool", default=True),
        "no_fit_hint": Arg("str"),  # an option appended to the "no torch fits" failure
    }
    mutually_exclusive = (("mirror", "index_url"), ("env", "conda"))
    supports_check_mode = True

    def check_args(self, args: dict) -> list[str]:
        # start-up time: a playbook loads every module; the install stack only when this one runs
        from provision.install.mirrors import PRESETS

        problems = []
        mirror = args.get("mirror")
        if isinstance(mirror, str) and "{{" not in mirror and mirror not in PRESETS:
            problems.append(
                f"install_torch: unknown mirror {mirror!r}; presets: {', '.join(PRESETS)}"
            )
        bad = [
            w
            for w in args.get("with") or []
            if isinstance(w, str) and "{{" not in w and w not in ("torchvision", "torchaudio")
        ]
        if bad:
            problems.append(
                f"install_torch: 'with' takes torchvision, torchaudio; got {', '.join(bad)}"
            )
        if args.get("conda"):
            # start-up time: a playbook loads every module; the install stack only when this one runs
            from provision.install.installer import CONDA_REMOVED

            problems.append(f"install_torch: 'conda' {CONDA_REMOVED}")
        return problems

    def run(self, ctx: TaskContext) -> ModuleResult:
        from provision.install.installer import (  # start-up time: a playbook loads every module; the install stack only when this one runs
            InstallError,
            InstallOptions,
            install,
        )
        from provision.install.lockfile import read_lock
        from provision.install.mirrors import IndexOptions

        a = ctx.args
        requirements = [
            str(ctx.find_file(r, "files")) if not Path(r).is_absolute() else r
            for r in a.get("requirements") or []
        ]
        try:
            options = InstallOptions(
                torch=a.get("torch") or "latest",
                variant=a.get("variant"),
                with_=list(a.get("with") or []),
                extras=list(a.get("packages") or []),
                requirements=requirements,
                env=a.get("env"),
                python=a.get("python"),
                conda=a.get("conda"),
                index=IndexOptions(
                    mirror=a.get("mirror"),
                    index_url=a.get("index_url"),
                    extra_index_urls=list(a.get("extra_index_urls") or []),
                    find_links=list(a.get("find_links") or []),
                    trusted_hosts=list(a.get("trusted_hosts") or []),
                    proxy=a.get("proxy"),
                    network_turbo=bool(a.get("network_turbo")),
                ),
                relay=bool(a.get("relay")),
                locked=read_lock(ctx.find_file(a["locked"], "files")) if a.get("locked") else None,
                allow_minor_version_compat=bool(a.get("minor_version_compat", True)),
                pip_timeout=float(a.get("pip_timeout") or 30.0),
                check_only=ctx.check_mode,
                keep_base=bool(a.get("keep_base")),
                allow_cuda_build_on_cpu=bool(a.get("allow_cuda_build_on_cpu")),
            )
            facts = dict(ctx.facts) if ctx.facts and ctx.facts.get("gpus") is not None else None
            result = install(
                ctx.connection, ctx.agent, options, facts=facts, progress=ctx.on_progress
            )
        except InstallError as exc:
            if exc.no_fit and not a.get("required", True):
                return _no_torch(exc)
            detail = exc.detail
            if exc.no_fit and a.get("no_fit_hint"):
                detail += f"\n  option: {a['no_fit_hint']}"
            raise ModuleFailure(detail, **exc.result.as_dict()) from None
        except ConfigError as exc:
            raise ModuleFailure(str(exc)) from None
        data = result.as_dict()
        return ModuleResult(
            changed=result.changed,
            msg=result.message,
            data=data,
            facts={
                "provision_torch": {
                    "env": result.env,
                    "python": result.python,
                    "torch": (result.plan or {}).get("torch"),
                    "variant": (result.plan or {}).get("variant"),
                }
            },
        )


def _no_torch(exc: InstallError) -> ModuleResult:
    """No torch fits and none is required: the reason and the options as a warning, not a
    failure, so the play goes on (staging needs no torch)."""
    data = exc.result.as_dict()
    message = f"no torch installed: {exc.detail}"
    data.update(action="no-fit", changed=False, message=message)
    data["warnings"] = [*data.get("warnings", []), message]
    return ModuleResult(changed=False, msg=message, data=data)
