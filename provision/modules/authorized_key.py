"""`authorized_key` (ansible.posix.authorized_key): keys present or absent in a user's
authorized_keys, with Ansible's rules — a key is known by its base64 blob; its type, options and
comment must match for `present`; `exclusive` drops every other key; lines provision cannot parse
(comments, blanks, other text) stay where they were; new keys go after the existing ones, in the
order given. Keys may come from the task, an `https://` URL or a `file://` path on the host
(fetched by the host, as Ansible's module does).

Two round trips: the host's python reads (the user's home and ids, the file, a URL or file key),
provision computes the new file, the host's python writes it (0600, owned by the user; with
`manage_dir` the directory too, 0700).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from provision.modules._hostfile import run_host_python
from provision.modules.base import Arg, Module, ModuleFailure, ModuleResult, TaskContext, register

KEY_TYPES = frozenset(
    "ssh-ed25519 ssh-rsa ssh-dss ecdsa-sha2-nistp256 ecdsa-sha2-nistp384 ecdsa-sha2-nistp521 "
    "sk-ecdsa-sha2-nistp256@openssh.com sk-ssh-ed25519@openssh.com "
    "webauthn-sk-ecdsa-sha2-nistp256@openssh.com ssh-xmss@openssh.com rsa-sha2-256 rsa-sha2-512 "
    "ssh-ed25519-cert-v01@openssh.com ssh-rsa-cert-v01@openssh.com ssh-dss-cert-v01@openssh.com "
    "ecdsa-sha2-nistp256-cert-v01@openssh.com ecdsa-sha2-nistp384-cert-v01@openssh.com "
    "ecdsa-sha2-nistp521-cert-v01@openssh.com sk-ecdsa-sha2-nistp256-cert-v01@openssh.com "
    "sk-ssh-ed25519-cert-v01@openssh.com ssh-xmss-cert-v01@openssh.com "
    "rsa-sha2-256-cert-v01@openssh.com rsa-sha2-512-cert-v01@openssh.com".split()
)
_OPTION = re.compile(r"""(?:[^,"']|"[^"]*"|'[^']*')+""")


@dataclass
class Entry:
    """One line of the file: a key (`kind` its type) or a line kept as it is (`kind` None)."""

    ident: str  # the key's blob, or the whole line
    kind: str | None
    options: list[tuple[str, str | None]]
    comment: str
    rank: int
    line: str = ""

    def same(self, other: Entry) -> bool:
        """Everything but the rank; options compared by name (each name's values in order)."""
        return (self.ident, self.kind, self.comment) == (
            other.ident,
            other.kind,
            other.comment,
        ) and (_by_name(self.options) == _by_name(other.options))

    def text(self) -> str:
        if self.kind is None:
            return self.line
        opts = ",".join(k if v is None else f"{k}={v}" for k, v in self.options)
        return f"{opts + ' ' if opts else ''}{self.kind} {self.ident} {self.comment}\n"


def _by_name(options: list[tuple[str, str | None]]) -> dict[str, list[str | None]]:
    out: dict[str, list[str | None]] = {}
    for k, v in options:
        out.setdefault(k, []).append(v)
    return out


def parse_options(text: str | None) -> list[tuple[str, str | None]]:
    """`no-pty,from="a,b"` -> [("no-pty", None), ("from", '"a,b"')]: commas inside quotes stay."""
    out: list[tuple[str, str | None]] = []
    for part in _OPTION.findall(text or ""):
        name, eq, value = part.partition("=")
        out.append((name, value) if eq else (part, None))
    return out


def parse_key(line: str, rank: int) -> Entry | None:
    """A key line (options, type, blob, comment), a kept line (a `#` word first), or None."""
    line = line.replace(r"\#", "#")
    words = line.split()
    if words and words[0] == "#":
        return Entry(line, None, [], "", rank, line)
    index = next((i for i, w in enumerate(words) if w in KEY_TYPES), None)
    if index is None:
        return None
    if index + 1 >= len(words):
        raise ModuleFailure(f"invalid key specified: {line.strip()} (no key after {words[index]})")
    options = parse_options(" ".join(words[:index])) if index else []
    return Entry(words[index + 1], words[index], options, " ".join(words[index + 2 :]), rank)


def parse_file(content: str) -> dict[str, Entry]:
    """The file's lines keyed as Ansible keys them (a later duplicate replaces an earlier one)."""
    entries: dict[str, Entry] = {}
    for rank, line in enumerate(content.splitlines(True)):
        entry = parse_key(line, rank) or Entry(line, None, [], "", rank, line)
        entries[entry.ident] = entry
    return entries


def edit(content: str, keys_text: str, a: dict[str, Any]) -> str | None:
    """The file's new text, or None when it already is as asked."""
    existing = parse_file(content)
    base_rank = len(existing)
    wanted: list[str] = []
    write = False
    for rank, raw in enumerate(s for s in keys_text.splitlines() if s and not s.startswith("#")):
        new = parse_key(raw, rank)
        if new is None or new.kind is None:
            raise ModuleFailure(f"invalid key specified: {raw}")
        if a["key_options"] is not None:
            new.options = parse_options(a["key_options"])
        if a["comment"] is not None:
            new.comment = a["comment"]
        old = existing.get(new.ident)
        if a["state"] == "present":
            wanted.append(new.ident)
            if old is not None and old.same(new):
                continue
            new.rank = base_rank + rank
            existing[new.ident] = new  # (a different old line for the same key goes)
            write = True
        elif old is not None:
            del existing[new.ident]
            write = True
    if a["state"] == "present" and a["exclusive"]:
        for ident in [i for i in existing if i not in wanted]:
            del existing[ident]
            write = True
    if not write:
        return None
    return "".join(e.text() for e in sorted(existing.values(), key=lambda e: e.rank))


# Runs on the host (python 3.8+): reads, or writes, the user's keys file. Request on stdin.
_HOST = r"""
import grp, json, os, pwd, stat, sys, tempfile
req = json.load(sys.stdin); out = {}
def pathinfo(p):
    # what Ansible's exit_json adds for a result with a `path`
    if p is None or not os.path.exists(p):
        return {} if p is None else {"state": "absent"}
    st, lst = os.stat(p), os.lstat(p)
    try:
        owner = pwd.getpwuid(st.st_uid)[0]
    except KeyError:
        owner = str(st.st_uid)
    try:
        group = grp.getgrgid(st.st_gid)[0]
    except KeyError:
        group = str(st.st_gid)
    state = ("link" if os.path.islink(p) else "directory" if os.path.isdir(p)
             else "hard" if st.st_nlink > 1 else "file")
    return {"uid": st.st_uid, "gid": st.st_gid, "owner": owner, "group": group,
            "mode": "0%03o" % stat.S_IMODE(lst.st_mode), "state": state, "size": lst.st_size}
def done(**kw):
    out.update(kw)
    if "error" not in out:
        out["pathinfo"] = pathinfo(req["path"])
    print(sys.argv[1]); print(json.dumps(out)); sys.exit(0)
user, path, follow = req["user"], req["path"], req["follow"]
try:
    pw = pwd.getpwnam(user)
except KeyError as e:
    pw, why = None, str(e)
if req["op"] == "read":
    key = req["key"]
    if key.startswith("http"):
        import ssl, urllib.request
        ctx = None if req["validate_certs"] else ssl._create_unverified_context()
        try:
            with urllib.request.urlopen(key, timeout=30, context=ctx) as r:
                if r.status != 200:
                    done(error="Error getting key from: %s" % key)
                key = r.read().decode()
        except Exception:
            done(error="Error getting key from: %s" % key)
    if key.startswith("file"):
        from urllib.parse import urlparse
        kp = urlparse(key).path
        if not os.path.exists(kp):
            done(error="Path to a key file not found: %s" % kp)
        if not os.path.isfile(kp):
            done(error="Path to a key is a directory and must be a file: %s" % kp)
        key = open(kp).read()
    out["key"] = key
    if req["check"] and path is not None:
        keyfile = os.path.realpath(path) if follow else path
    elif pw is None:
        if req["check"] and path is None:
            done(error="Either user must exist or you must provide full path to key file in check mode")
        done(error="Failed to lookup user %s: %s" % (user, why))
    else:
        keyfile = path or os.path.join(pw.pw_dir, ".ssh", "authorized_keys")
        if follow:
            keyfile = os.path.realpath(keyfile)
    try:
        with open(keyfile) as fh:
            content = fh.read()
    except FileNotFoundError:
        content = ""
    except PermissionError:
        done(error="Permission denied on file or path for authorized keys file: %s" % keyfile)
    done(keyfile=keyfile, content=content)
if pw is None:
    done(error="Failed to lookup user %s" % user)
keyfile = path or os.path.join(pw.pw_dir, ".ssh", "authorized_keys")
sshdir = os.path.dirname(keyfile)
if follow:
    keyfile = os.path.realpath(keyfile)
if req["manage_dir"]:
    if not os.path.exists(sshdir):
        os.mkdir(sshdir, 0o700)
    os.chown(sshdir, pw.pw_uid, pw.pw_gid, follow_symlinks=follow)
    os.chmod(sshdir, 0o700)
os.makedirs(os.path.dirname(keyfile), exist_ok=True)
fd, tmp = tempfile.mkstemp(dir=os.path.dirname(keyfile), prefix=".authorized_keys.")
try:
    with os.fdopen(fd, "w") as fh:
        fh.write(req["content"])
    os.chown(tmp, pw.pw_uid, pw.pw_gid)
    os.chmod(tmp, 0o600)
    os.replace(tmp, keyfile)
except BaseException:
    os.unlink(tmp); raise
done(keyfile=keyfile)
"""


@register
class AuthorizedKey(Module):
    name = "authorized_key"
    aliases = ("ansible.posix.authorized_key",)
    args = {
        "user": Arg("str", required=True),
        "key": Arg("str", required=True),
        "path": Arg("path"),
        "manage_dir": Arg("bool", default=True),
        "state": Arg("str", default="present", choices=("absent", "present")),
        "key_options": Arg("str"),
        "exclusive": Arg("bool", default=False),
        "comment": Arg("str"),
        "validate_certs": Arg("bool", default=True),
        "follow": Arg("bool", default=False),
    }

    def run(self, ctx: TaskContext) -> ModuleResult:
        a = ctx.args
        request = {
            k: a[k] for k in ("user", "key", "path", "follow", "validate_certs", "manage_dir")
        }
        got = run_host_python(
            ctx, _HOST, {**request, "op": "read", "check": ctx.check_mode}, what="authorized_key"
        )
        if "error" in got:
            raise ModuleFailure(got["error"])
        data = {k: a[k] for k in self.args}
        data["keyfile"] = got["keyfile"]
        after = edit(got["content"], got["key"], a)
        out = ModuleResult(data=data)
        if after is not None:
            out.changed = True
            if ctx.diff:
                diff = {"before_header": got["keyfile"], "after_header": got["keyfile"]}
                diff.update(before=got["content"], after=after)
                out.diff, data["diff"] = [diff], diff  # registered as the module returns it
            if not ctx.check_mode:
                got = run_host_python(
                    ctx, _HOST, {**request, "op": "write", "content": after}, what="authorized_key"
                )
                if "error" in got:
                    raise ModuleFailure(got["error"])
        data.update(got.get("pathinfo") or {})  # Ansible's exit_json: `path`'s stat, `state` too
        return out
        out.changed = True
        if ctx.diff:
            out.diff = [
                {
                    "before_header": got["keyfile"],
                    "after_header": got["keyfile"],
                    "before": got["content"],
                    "after": after,
                }
            ]
        if not ctx.check_mode:
            wrote = run_host_python(
                ctx, _HOST, {**request, "op": "write", "content": after}, what="authorized_key"
            )
            if "error" in wrote:
                raise ModuleFailure(wrote["error"])
        return out
