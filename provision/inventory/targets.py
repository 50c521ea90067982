"""One host from one string, in every form a user pastes.

    gpu1                              bare name (maybe an ~/.ssh/config alias, resolved later)
    root@1.2.3.4                      user@host
    root@1.2.3.4:2222                 user@host:port
    ssh://root@1.2.3.4:2222           URL form
    [2001:db8::1]:2222, 2001:db8::1   IPv6 (a port needs the brackets)
    "ssh -p 41234 root@region-3.autodl.com"   a console's ssh command, as ONE argument,
                                      with -p -l -i -J -o Port/User/IdentityFile/ProxyJump/HostName

`localhost`, `127.0.0.1` and `::1` run without SSH unless a user or port is written out, in
which case we SSH to the loopback address like `ssh -p 2222 root@localhost` would.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import shlex

from provision.errors import ConfigError
from provision.inventory.model import LOCAL_NAMES, Host

log = logging.getLogger(__name__)

FORMS = (
    "write host, user@host, user@host:port, ssh://user@host:port, [ipv6]:port, "
    'or paste the console\'s ssh command in quotes: "ssh -p PORT user@host"'
)

# OpenSSH's single-letter options: these take an argument, the others are plain flags.
_SSH_OPTS_WITH_ARG = set("BbcDEeFIiJLlmOoPpQRSWw")
_SSH_FLAGS = set("46AaCfGgKkMNnqsTtVvXxYy")
# -o options that concern host-key checking: we follow --known-hosts instead, and say so.
_HOSTKEY_OPTIONS = {"stricthostkeychecking", "userknownhostsfile", "globalknownhostsfile"}


class AddressError(ValueError):
    """A malformed host/port; the caller adds where it came from (file:line or the target)."""


def parse_port(value: object, where: str = "") -> int:
    """An int port in 1-65535 from an int or a string; anything else names the value."""
    text = str(value).strip()
    if isinstance(value, bool) or not text.isdigit() or not 1 <= int(text) <= 65535:
        at = f" in {where}" if where else ""
        raise AddressError(f"bad port {value!r}{at}: a port is a number from 1 to 65535")
    return int(text)


def is_ip_address(text: str) -> bool:
    try:
        ipaddress.ip_address(text.split("%", 1)[0])  # fe80::1%eth0: zone ids are allowed
    except ValueError:
        return False
    return True


def _is_ipv6(text: str) -> bool:
    return ":" in text and is_ip_address(text)


def split_host_port(text: str) -> tuple[str, int | None]:
    """`host`, `host:port`, `[v6]:port`, `[v6]`, raw `v6` -> (host, port or None).

    Brackets that are not an IPv6 address are left alone (they are host ranges,
    `gpu[01:04]:2222`), and a ':' inside them is not a port separator.
    """
    if text.startswith("["):
        close = text.find("]")
        inner, rest = text[1:close], text[close + 1 :]
        if close > 0 and _is_ipv6(inner):
            if not rest:
                return inner, None
            if rest.startswith(":"):
                return inner, parse_port(rest[1:], repr(text))
            raise AddressError(f"unexpected {rest!r} after ']' in {text!r}: write [ipv6]:port")
    colons: list[int] = []
    depth = 0
    for i, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == ":" and depth == 0:
            colons.append(i)
    if not colons:
        return text, None
    if len(colons) == 1:
        host, port = text[: colons[0]], text[colons[0] + 1 :]
        if not host:
            raise AddressError(f"{text!r} has a port but no host before ':'")
        if not port:
            raise AddressError(f"{text!r} ends with ':' but no port after it")
        return host, parse_port(port, repr(text))
    if _is_ipv6(text):
        return text, None
    raise AddressError(
        f"{text!r} has several ':' but is not an IPv6 address; an IPv6 address with a port is "
        "written [addr]:port"
    )


def _check_hostname(host: str, text: str) -> None:
    if not host:
        raise AddressError(f"no host name in {text!r}")
    bad = [c for c in host if c.isspace() or c in "/\\@'\"`$;|&<>(){}[],"]
    if bad:
        raise AddressError(f"host {host!r} in {text!r} contains {bad[0]!r}, which no host name has")


def canonical_name(user: str | None, host: str, port: int | None) -> str:
    """`user@host:port` with brackets around an IPv6 address that has a port."""
    shown = f"[{host}]" if port is not None and ":" in host else host
    return f"{user + '@' if user else ''}{shown}{'' if port is None else f':{port}'}"


def _parse_destination(text: str) -> tuple[str | None, str, int | None]:
    rest = text
    if rest.lower().startswith("ssh://"):
        rest = rest[len("ssh://") :].rstrip("/")
        if "/" in rest or "?" in rest or "#" in rest:
            raise AddressError(f"{text!r}: an ssh:// URL is ssh://[user@]host[:port] with no path")
    user, at, hostport = rest.rpartition("@")
    if at and not user:
        raise AddressError(f"{text!r} has '@' but no user before it")
    host, port = split_host_port(hostport)
    _check_hostname(host, text)
    return (user or None), host, port


def _make_host(
    user: str | None,
    host: str,
    port: int | None,
    *,
    address: str | None = None,
    key_file: str | None = None,
    proxy_jump: str | None = None,
) -> Host:
    address = address or host
    local = address in LOCAL_NAMES and user is None and port is None
    return Host(
        name=canonical_name(user, host, port),
        address=address,
        port=port,
        user=user,
        key_file=key_file,
        proxy_jump=proxy_jump,
        local=local,
    )


def parse_target(text: str) -> Host:
    """A Host from one target string; a malformed one raises ConfigError naming the value."""
    raw = text.strip()
    if raw.startswith("$ "):  # copied along with the console's prompt
        raw = raw[2:].strip()
    if not raw:
        raise ConfigError(f"empty target: {FORMS}")
    try:
        words = shlex.split(raw)
    except ValueError as exc:
        raise ConfigError(f"target {text!r}: {exc} (check the quotes)") from None
    if not words:
        raise ConfigError(f"empty target: {FORMS}")
    program = os.path.basename(words[0])
    if program == "sshpass":
        raise ConfigError(
            "target starts with sshpass: passwords are never taken from the command line. Put the "
            "password in an environment variable and pass its name with --password-env, then give "
            "the ssh command alone"
        )
    try:
        if program == "ssh":
            return _parse_ssh_command(words[1:], raw)
        if len(words) > 1 or any(c.isspace() for c in raw):
            raise AddressError(f"target {raw!r} contains spaces: {FORMS}")
        user, host, port = _parse_destination(raw)
        return _make_host(user, host, port)
    except AddressError as exc:
        raise ConfigError(str(exc)) from None


def _parse_ssh_command(args: list[str], raw: str) -> Host:
    """Read what matters from ssh's own argv; the first value given for an option wins, as in ssh."""
    got: dict[str, str] = {}
    destination: str | None = None
    remote_command: list[str] = []
    i = 0

    def keep(key: str, value: str) -> None:
        got.setdefault(key, value)

    while i < len(args):
        word = args[i]
        i += 1
        if destination is not None and not word.startswith("-"):
            remote_command = args[i - 1 :]
            break
        if word == "--":
            if destination is None and i < len(args):
                destination = args[i]
                i += 1
            remote_command = args[i:]
            break
        if not word.startswith("-") or word == "-":
            destination = word
            continue
        letters = word[1:]
        for pos, letter in enumerate(letters):
            if letter in _SSH_FLAGS:
                continue
            if letter not in _SSH_OPTS_WITH_ARG:
                raise AddressError(f"unknown ssh option -{letter} in {raw!r}")
            value = letters[pos + 1 :]
            if not value:
                if i >= len(args):
                    raise AddressError(f"ssh option -{letter} needs a value in {raw!r}")
                value = args[i]
                i += 1
            if letter == "p":
                keep("port", value)
            elif letter == "l":
                keep("user", value)
            elif letter == "i":
                keep("identityfile", value)
            elif letter == "J":
                keep("proxyjump", value)
            elif letter == "o":
                _ssh_option(value, keep, raw)
            elif letter == "F":
                log.warning(
                    "ignoring -F %s in the pasted ssh command: pass --ssh-config %s instead",
                    value,
                    value,
                )
            else:  # -L/-R/-D forwards, -W, -E log file, ciphers ...: not needed to provision
                log.debug("ignoring ssh option -%s %s", letter, value)
            break
    if destination is None:
        raise AddressError(f"the ssh command {raw!r} has no destination (user@host)")
    if remote_command:
        log.warning(
            "ignoring the remote command %r in the pasted ssh command", " ".join(remote_command)
        )
    user, host, port = _parse_destination(destination)
    if "port" in got:
        port = parse_port(got["port"], f"the ssh command {raw!r}")
    user = got.get("user", user)
    jump = got.get("proxyjump")
    return _make_host(
        user,
        host,
        port,
        address=got.get("hostname"),
        key_file=got.get("identityfile"),
        proxy_jump=None if jump is None or jump.lower() == "none" else jump,
    )


def _ssh_option(text: str, keep, raw: str) -> None:  # type: ignore[no-untyped-def]
    """`-o Key=Value` or `-o "Key Value"`, keys case-insensitive as in ssh_config."""
    key, sep, value = text.partition("=")
    if not sep:
        key, _, value = text.strip().partition(" ")
    key, value = key.strip().lower(), value.strip()
    if not key or not value:
        raise AddressError(f"ssh option -o {text!r} in {raw!r} is not Key=Value")
    if key in ("port", "user", "identityfile", "proxyjump", "hostname"):
        keep(key, value)
    elif key in _HOSTKEY_OPTIONS:
        log.warning(
            "ignoring -o %s in the pasted ssh command: host keys are checked as --known-hosts says "
            "(strict, accept-new or off)",
            text,
        )
    elif key == "proxycommand":
        log.warning("ignoring -o ProxyCommand: use -J / ProxyJump, or an ~/.ssh/config alias")
    else:  # ServerAliveInterval, ConnectTimeout, ...: our own settings apply
        log.debug("ignoring ssh option -o %s", text)
