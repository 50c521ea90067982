"""The .gitignore rules git applies, for a --dir that is not a git repository (gitignore(5)):
blank lines and `#` comments skipped, `!` negates, a trailing `/` matches only folders, a
pattern with a `/` before its end is anchored to its .gitignore's folder, `*` `?` `[...]` do not
cross `/`, `**/`, `/**/` and `/**` span folders, and a file inside an ignored folder stays
ignored (git does not look inside it). Every folder's own .gitignore applies below it."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Rule:
    base: str  # folder of the .gitignore, relative ("" for the root)
    regex: re.Pattern[str]
    negate: bool
    dir_only: bool
    source: str  # "path/.gitignore:line" for messages


def _translate(pattern: str) -> str:
    out = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("/**", i) and i + 3 == len(pattern):
            out.append("/.*")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = pattern.find("]", i + 2)
            if end < 0:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : end]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = end
        elif c == "\\" and i + 1 < len(pattern):
            i += 1
            out.append(re.escape(pattern[i]))
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def parse(text: str, base: str = "", source: str = ".gitignore") -> list[Rule]:
    rules = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.rstrip("\n")
        if not line.strip() or line.startswith("#"):
            continue
        if not line.endswith("\\ "):
            line = line.rstrip(" ")
        negate = line.startswith("!")
        if negate:
            line = line[1:]
        elif line.startswith("\\!") or line.startswith("\\#"):
            line = line[1:]
        dir_only = line.endswith("/")
        line = line.rstrip("/")
        if not line:
            continue
        anchored = "/" in line
        line = line.lstrip("/")
        body = _translate(line)
        regex = re.compile(("" if anchored else "(?:.*/)?") + body + r"\Z", re.S)
        rules.append(Rule(base, regex, negate, dir_only, f"{source}:{n}"))
    return rules


def ignored(rules: list[Rule], rel: str, is_dir: bool) -> bool:
    """Whether `rel` (relative to the root, "/"-separated) is ignored; the last match wins."""
    verdict = False
    for rule in rules:
        if rule.base:
            if not rel.startswith(rule.base + "/"):
                continue
            sub = rel[len(rule.base) + 1 :]
        else:
            sub = rel
        if rule.dir_only and not is_dir:
            continue
        if rule.regex.match(sub):
            verdict = not rule.negate
    return verdict
