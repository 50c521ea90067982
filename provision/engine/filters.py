"""Ansible filters beyond the core set in templating.py: json_query, password_hash, ipaddr and
friends, map-friendly helpers. Each one is the Ansible/collection behaviour for the common cases;
what needs an optional library (jmespath, passlib / crypt) says so when that library is missing.
"""

from __future__ import annotations

import ipaddress
import random
import string
import urllib.parse
from typing import Any

import jinja2

from provision.engine.math_filters import MATH_FILTERS


def _json_query(data: Any, expr: str) -> Any:
    try:
        import jmespath
    except ImportError:
        raise jinja2.TemplateRuntimeError(
            "json_query needs the jmespath package on the controller (pip install jmespath); "
            "or use selectattr/map instead"
        ) from None
    return jmespath.search(str(expr), data)


def _salt(length: int = 16) -> str:
    alphabet = string.ascii_letters + string.digits + "./"
    return "".join(random.SystemRandom().choice(alphabet) for _ in range(length))


_SCHEMES = {
    "sha512": ("sha512_crypt", "6"),
    "sha256": ("sha256_crypt", "5"),
    "md5": ("md5_crypt", "1"),
}


def _password_hash(
    password: Any, hashtype: str = "sha512", salt: str | None = None, rounds: int | None = None
) -> str:
    """`crypt(3)`-style hash for user/password fields: passlib when present, else the `crypt`
    module of Pythons that still ship it (< 3.13)."""
    if hashtype not in _SCHEMES:
        raise jinja2.TemplateRuntimeError(
            f"password_hash: hash type {hashtype!r} is not supported (use sha512, sha256 or md5)"
        )
    scheme, prefix = _SCHEMES[hashtype]
    salt = salt or _salt(8 if hashtype == "md5" else 16)
    try:
        from passlib import hash as passlib_hash

        handler = getattr(passlib_hash, scheme)
        settings: dict[str, Any] = {"salt": salt}
        if rounds is not None and hashtype != "md5":
            settings["rounds"] = rounds
        elif hashtype != "md5":
            settings["rounds"] = 5000  # crypt(3)'s default, as Ansible uses
        return str(handler.using(**settings).hash(str(password)))
    except ImportError:
        pass
    try:
        import crypt  # noqa: PLC0415 - removed in Python 3.13
    except ImportError:
        raise jinja2.TemplateRuntimeError(
            "password_hash needs passlib on the controller (pip install passlib)"
        ) from None
    rounds_part = f"rounds={rounds}$" if rounds else ""
    return str(crypt.crypt(str(password), f"${prefix}${rounds_part}{salt}"))


def _interface(value: Any) -> ipaddress.IPv4Interface | ipaddress.IPv6Interface | None:
    try:
        return ipaddress.ip_interface(str(value).strip())
    except ValueError:
        return None


def _ipaddr(value: Any, query: str = "") -> Any:
    """The everyday subset of ansible.utils.ipaddr: validation (False when not an address) and
    address / network / netmask / prefix / broadcast / host / public / private / size."""
    if isinstance(value, (list, tuple)):
        out = [_ipaddr(v, query) for v in value]
        return [v for v in out if v not in (False, None)]
    iface = _interface(value)
    if iface is None:
        return False
    text = str(value).strip()
    net = iface.network
    queries = {
        "": lambda: text,
        "address": lambda: str(iface.ip),
        "network": lambda: str(net.network_address),
        "netmask": lambda: str(net.netmask),
        "prefix": lambda: net.prefixlen,
        "broadcast": lambda: str(net.broadcast_address) if net.version == 4 else False,
        "host": lambda: f"{iface.ip}/{net.prefixlen}",
        "net": lambda: str(net) if "/" in text else False,
        "cidr": lambda: str(net),
        "size": lambda: net.num_addresses,
        "public": lambda: text if iface.ip.is_global else False,
        "private": lambda: text if iface.ip.is_private else False,
        "ipv4": lambda: text if iface.version == 4 else False,
        "ipv6": lambda: text if iface.version == 6 else False,
    }
    if query not in queries:
        raise jinja2.TemplateRuntimeError(
            f"ipaddr: query {query!r} is not supported (use one of {', '.join(q for q in queries if q)})"
        )
    return queries[query]()


def _ipv4(value: Any, query: str = "") -> Any:
    iface = _interface(value)
    return _ipaddr(value, query) if iface is not None and iface.version == 4 else False


def _ipv6(value: Any, query: str = "") -> Any:
    iface = _interface(value)
    return _ipaddr(value, query) if iface is not None and iface.version == 6 else False


def _random_mac(prefix: str) -> str:
    parts = prefix.split(":")
    rng = random.SystemRandom()
    while len(parts) < 6:
        parts.append(f"{rng.randint(0, 255):02x}")
    return ":".join(parts)


def _rand(end: Any, start: Any = None, step: Any = None, seed: Any = None) -> Any:
    """Ansible's `random`: an integer in range(start, end, step) for an integer, an item of a
    sequence otherwise; `seed` makes it repeatable."""
    rng = random.SystemRandom() if seed is None else random.Random(seed)
    if isinstance(end, int):
        return rng.randrange(start or 0, end, step or 1)
    if hasattr(end, "__iter__"):
        if start or step:
            raise jinja2.TemplateRuntimeError("start and step can only be used with integer values")
        return rng.choice(list(end))
    raise jinja2.TemplateRuntimeError("random can only be used on sequences and integers")


def _shuffle(value: Any, seed: Any = None) -> Any:
    """Ansible's `shuffle`: the items in a random order (repeatable with `seed`)."""
    try:
        items = list(value)
        (random.SystemRandom() if seed is None else random.Random(seed)).shuffle(items)
        return items
    except Exception:
        return value


def _urldecode(value: Any) -> str:
    return urllib.parse.unquote_plus(str(value))


_URL_PARTS = ("fragment", "hostname", "netloc", "password", "path", "port", "query", "scheme",
              "username")


def _urlsplit(value: Any, query: str = "") -> Any:
    """Ansible's urlsplit: the parts of the URL as a mapping, or the one part `query` names."""
    parts = urllib.parse.urlsplit(str(value))
    results = {name: getattr(parts, name) for name in _URL_PARTS}
    if query:
        if query not in results:
            raise jinja2.TemplateRuntimeError(f"urlsplit: unknown URL component: {query}")
        return results[query]
    return results


EXTRA_FILTERS: dict[str, Any] = {
    **MATH_FILTERS,  # engine/math_filters.py
    "urldecode": _urldecode,
    "urlsplit": _urlsplit,
    "json_query": _json_query,
    "password_hash": _password_hash,
    "ipaddr": _ipaddr,
    "ansible.utils.ipaddr": _ipaddr,
    "ipv4": _ipv4,
    "ipv6": _ipv6,
    "random_mac": _random_mac,
    "random": _rand,
    "shuffle": _shuffle,
    "community.general.json_query": _json_query,
}
