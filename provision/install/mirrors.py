"""Where pip gets packages from: mirror presets, explicit indexes, trusted hosts, proxies.

Two kinds of mirror matter for torch, and confusing them is how a V100 ends up with a cu130
build: a **PyPI mirror** (tuna, aliyun, ... `/simple`) carries only what PyPI carries, i.e. on
Linux x86_64 the single default CUDA build of each torch release; a **PyTorch wheel mirror**
(`.../pytorch-wheels/<tag>/`) carries the variant builds of download.pytorch.org. So a preset
names both, torch comes from a PyTorch wheel index (a mirror of it when one answers for the
planned wheel, else download.pytorch.org), everything else from the PyPI mirror; only when no
PyTorch wheel index is reachable from the host does the plan fall back to PyPI's build — and the
resolver decides whether that build can run there (it is told via the index *kind*). Which
versions each index really has is asked at install time (provision/install/index_query.py).

Sources (see ../shared/reference/gpu_compat.yaml `mirrors:`): each mirror's help page, listed
on its preset. PyTorch wheel mirror availability is reported inconsistently, so every one is
asked from the host at install time before it is used (all at once, the whole question
bounded by 3x probe_timeout: provision/agent/index_list.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from urllib.parse import quote, urlsplit, urlunsplit

from provision.errors import ConfigError

PYTORCH_INDEX = "https://download.pytorch.org/whl"
PYPI_INDEX = "https://pypi.org/simple"
NETWORK_TURBO = "/etc/network_turbo"  # AutoDL's academic proxy; sourcing it sets http(s)_proxy

# Index kinds, as the resolver's request takes them:
KIND_PYTORCH = "pytorch"  # variant builds (+cpu, +cu126, ...): any variant can be planned
KIND_PYPI = "pypi"  # PyPI or a mirror of it: only PyPI's default build of each release
KIND_CUSTOM = "custom"  # unknown (private index, devpi, ...): plan freely, verify the variant after
KIND_LOCAL = "local"  # --no-index with local wheels (relay): whatever was downloaded


@dataclass(frozen=True)
class TorchWheelMirror:
    """A mirror of download.pytorch.org/whl/<tag>. `url` holds `{variant}`."""

    url: str
    usage: str  # "index" (PEP 503, --index-url) or "find-links" (a flat listing, -f)
    confidence: str  # how sure the reference is that it serves current wheels


@dataclass(frozen=True)
class MirrorPreset:
    name: str
    pypi: str  # PEP 503 simple index mirroring PyPI
    torch_wheels: tuple[TorchWheelMirror, ...]
    source: str


PRESETS: dict[str, MirrorPreset] = {
    p.name: p
    for p in (
        MirrorPreset("pypi", PYPI_INDEX, (), "https://pypi.org/"),
        MirrorPreset(
            "tuna",
            "https://pypi.tuna.tsinghua.edu.cn/simple",
            (
                TorchWheelMirror(
                    "https://mirrors.tuna.tsinghua.edu.cn/pytorch-wheels/{variant}/",
                    "find-links",
                    "low",
                ),
            ),
            "https://mirrors.tuna.tsinghua.edu.cn/help/pypi/",
        ),
        MirrorPreset(
            "aliyun",
            "https://mirrors.aliyun.com/pypi/simple/",
            (
                TorchWheelMirror(
                    "https://mirrors.aliyun.com/pytorch-wheels/{variant}/", "find-links", "low"
                ),
            ),
            "https://developer.aliyun.com/mirror/pypi",
        ),
        MirrorPreset(
            "ustc",
            "https://mirrors.ustc.edu.cn/pypi/simple",
            (
                TorchWheelMirror(
                    "https://mirrors.ustc.edu.cn/pytorch-wheels/{variant}/", "find-links", "low"
                ),
            ),
            "https://mirrors.ustc.edu.cn/help/pypi.html",
        ),
        MirrorPreset(
            "huawei",
            "https://repo.huaweicloud.com/repository/pypi/simple",
            (),
            "https://mirrors.huaweicloud.com/ (repository/pypi)",
        ),
        MirrorPreset(
            "tencent",
            "https://mirrors.cloud.tencent.com/pypi/simple",
            (
                TorchWheelMirror(
                    "https://mirrors.cloud.tencent.com/pytorch-wheels/{variant}/",
                    "find-links",
                    "low",
                ),
            ),
            "https://mirrors.cloud.tencent.com/help/pypi.html",
        ),
    )
}

# Hosts known to mirror PyPI only: an --index-url on one of these can serve just PyPI's build.
_PYPI_HOSTS = {urlsplit(p.pypi).hostname for p in PRESETS.values()} | {
    "pypi.org",
    "pypi.python.org",
    "mirrors.bfsu.edu.cn",
    "mirrors.nju.edu.cn",
    "mirrors.163.com",
    "pypi.doubanio.com",
    "mirrors.huaweicloud.com",
    "pypi.mirrors.ustc.edu.cn",
}
_PYTORCH_PATH = re.compile(r"/(whl|pytorch-wheels|pytorch/whl)(/|$)")


@dataclass
class IndexOptions:
    """What the user asked for (CLI, project file or playbook), before any plan exists."""

    mirror: str | None = None
    index_url: str | None = None
    extra_index_urls: list[str] = field(default_factory=list)
    find_links: list[str] = field(default_factory=list)
    trusted_hosts: list[str] = field(default_factory=list)
    proxy: str | None = None  # explicit proxy for pip on the host; else the host's own env
    network_turbo: bool = False  # AutoDL: source /etc/network_turbo before pip runs
    probe_timeout: float = 5.0

    def validate(self) -> None:
        if self.mirror and self.index_url:
            raise ConfigError(
                "--mirror and --index-url both given; pick one (--mirror NAME is a preset of index URLs)"
            )
        if self.mirror and self.mirror not in PRESETS:
            raise ConfigError(f"unknown --mirror {self.mirror!r}; known: {', '.join(PRESETS)}")
        for what, url in [
            ("--index-url", self.index_url),
            *(("--extra-index-url", u) for u in self.extra_index_urls),
        ]:
            if url is None:
                continue
            parts = urlsplit(url)
            if parts.scheme not in ("http", "https", "file") or (
                parts.scheme != "file" and not parts.hostname
            ):
                raise ConfigError(f"{what} {mask_url(url)!r} is not an http(s):// or file:// URL")
        if self.proxy:
            parts = urlsplit(self.proxy)
            if parts.scheme not in ("http", "https", "socks5", "socks5h") or not parts.hostname:
                raise ConfigError(
                    f"--proxy {mask_url(self.proxy)!r} is not a proxy URL (http://host:port)"
                )
        if not 0 < self.probe_timeout <= 60:
            raise ConfigError(
                f"mirror probe timeout must be in (0, 60] seconds, got {self.probe_timeout}"
            )


def index_kind(options: IndexOptions) -> str:
    """What the resolver may assume the indexes can serve (before probing)."""
    if options.index_url:
        return url_kind(options.index_url)
    return KIND_PYTORCH  # presets and the default reach a PyTorch wheel index (or fall back later)


def url_kind(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme == "file":
        return KIND_CUSTOM
    if (parts.hostname or "") in _PYPI_HOSTS and not _PYTORCH_PATH.search(parts.path):
        return KIND_PYPI
    if parts.hostname == "download.pytorch.org" or _PYTORCH_PATH.search(parts.path):
        return KIND_PYTORCH
    return KIND_CUSTOM


@dataclass
class IndexConfig:
    """The indexes pip gets for one install, after planning and probing."""

    index_url: str | None  # None with no_index
    extra_index_urls: list[str] = field(default_factory=list)
    find_links: list[str] = field(default_factory=list)
    trusted_hosts: list[str] = field(default_factory=list)
    no_index: bool = False
    kind: str = KIND_CUSTOM
    torch_source: str = ""  # where torch itself comes from, masked, for the report
    warnings: list[str] = field(default_factory=list)
    proxy: str | None = None
    network_turbo: bool = False

    def describe(self) -> str:
        if self.no_index:
            return "local wheels only (--no-index): " + ", ".join(self.find_links)
        parts = [mask_url(self.index_url or "")]
        parts += [f"+ {mask_url(u)}" for u in self.extra_index_urls]
        parts += [f"+ -f {mask_url(u)}" for u in self.find_links]
        return " ".join(parts)

    def urls(self) -> list[str]:
        return [u for u in [self.index_url, *self.extra_index_urls, *self.find_links] if u]

    def as_dict(self) -> dict:
        """Masked: safe for JSON output, reports and lock files."""
        return {
            "index_url": mask_url(self.index_url) if self.index_url else None,
            "extra_index_urls": [mask_url(u) for u in self.extra_index_urls],
            "find_links": [mask_url(u) for u in self.find_links],
            "trusted_hosts": list(self.trusted_hosts),
            "no_index": self.no_index,
            "kind": self.kind,
            "torch_source": self.torch_source,
        }


def torch_index_candidates(options: IndexOptions, variant: str) -> list[tuple[str, str]]:
    """(url, usage) to try for torch's variant build, best first: the preset's PyTorch wheel
    mirrors, then download.pytorch.org. Empty when the user gave --index-url (their choice)."""
    if options.index_url:
        return []
    out: list[tuple[str, str]] = []
    if options.mirror:
        for m in PRESETS[options.mirror].torch_wheels:
            out.append((m.url.format(variant=variant), m.usage))
    out.append((f"{PYTORCH_INDEX}/{variant}", "index"))
    return out


def build_index_config(
    options: IndexOptions,
    *,
    plan_index_url: str | None,
    variant: str,
    reachable_torch_index: tuple[str, str] | None,
    fallback_to_pypi: bool = False,
) -> IndexConfig:
    """Combine the user's options with the plan and the probe's answer.

    `reachable_torch_index` is the first (url, usage) of torch_index_candidates that answered
    with the planned wheel, or None when none did (or the user's own --index-url is used);
    `fallback_to_pypi` says the plan was re-resolved for PyPI's default build.
    """
    pypi = PRESETS[options.mirror].pypi if options.mirror else PYPI_INDEX
    extra = list(options.extra_index_urls)
    links = list(options.find_links)
    warnings: list[str] = []
    if options.index_url:
        cfg = IndexConfig(index_url=options.index_url, kind=url_kind(options.index_url))
        cfg.torch_source = mask_url(options.index_url)
    elif fallback_to_pypi:
        cfg = IndexConfig(
            index_url=pypi, kind=KIND_PYPI, torch_source=f"{pypi} (PyPI's default build)"
        )
    elif reachable_torch_index is not None:
        url, usage = reachable_torch_index
        if usage == "index":
            cfg = IndexConfig(index_url=url, kind=KIND_PYTORCH, torch_source=url)
            extra.append(pypi)  # dependencies and --extra packages
        else:
            cfg = IndexConfig(index_url=pypi, kind=KIND_PYTORCH, torch_source=url)
            links.append(url)
    else:
        url = plan_index_url or f"{PYTORCH_INDEX}/{variant}"
        cfg = IndexConfig(index_url=url, kind=url_kind(url), torch_source=url)
        if url.rstrip("/") != pypi.rstrip("/"):
            extra.append(pypi)
    cfg.extra_index_urls = _dedupe(
        u for u in extra if u.rstrip("/") != (cfg.index_url or "").rstrip("/")
    )
    cfg.find_links = _dedupe(links)
    cfg.trusted_hosts = list(options.trusted_hosts)
    for url in cfg.urls():
        parts = urlsplit(url)
        if parts.scheme == "http" and parts.hostname:
            host = parts.hostname + (f":{parts.port}" if parts.port else "")
            if host not in cfg.trusted_hosts:
                cfg.trusted_hosts.append(host)
                warnings.append(
                    f"{mask_url(url)} is plain http: pip gets --trusted-host {host}; anyone on the path "
                    "can swap packages (wheel hashes in a lock file still protect --locked installs)"
                )
    cfg.warnings = warnings
    cfg.proxy = options.proxy
    cfg.network_turbo = options.network_turbo
    return cfg


def _dedupe(urls) -> list[str]:
    seen: list[str] = []
    for u in urls:
        if u not in seen:
            seen.append(u)
    return seen


# -- secrets --------------------------------------------------------------------------------


def mask_url(url: str | None) -> str:
    """https://user:token@host/simple -> https://user:****@host/simple (a bare token too)."""
    if not url:
        return url or ""
    parts = urlsplit(url)
    if parts.password is None and not (parts.username and "@" in parts.netloc):
        return url
    host = parts.hostname or ""
    if parts.port:
        host += f":{parts.port}"
    user = parts.username if parts.password is not None else None
    userinfo = f"{quote(user or '', safe='')}:****" if user else "****"
    return urlunsplit((parts.scheme, f"{userinfo}@{host}", parts.path, parts.query, parts.fragment))


def secrets_of(urls: list[str | None]) -> list[str]:
    """The credential strings inside URLs, to scrub from any text (pip output, errors)."""
    found: list[str] = []
    for url in urls:
        if not url:
            continue
        parts = urlsplit(url)
        userinfo = parts.netloc.rpartition("@")[0] if "@" in parts.netloc else ""
        if not userinfo:
            continue
        found.append(userinfo)
        if parts.password:
            found.append(parts.password)
            from urllib.parse import unquote

            found.append(unquote(parts.password))
        elif parts.username:
            found.append(parts.username)  # a bare token as the user name
    # longest first so a password inside a longer userinfo is replaced as a whole
    return sorted({s for s in found if len(s) >= 3}, key=len, reverse=True)


def scrub(text: str, secrets: list[str]) -> str:
    for s in secrets:
        text = text.replace(s, "****")
    return text


def has_credentials(url: str | None) -> bool:
    return bool(url) and "@" in urlsplit(url).netloc
