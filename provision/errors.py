"""Error types every layer shares. Each message says what, where, and what to do."""

from __future__ import annotations


class ProvisionError(Exception):
    """Base for errors shown to the user as one clear message (no traceback)."""


class ConfigError(ProvisionError):
    """Bad input on the controller: inventory, playbook, target string, option value.

    Exit code 2. The message names the file:line or the offending value.
    """


class HostError(ProvisionError):
    """A step failed on one host; the other hosts go on."""

    def __init__(self, host: str, message: str) -> None:
        super().__init__(f"{host}: {message}")
        self.host = host
        self.detail = message


class UnreachableError(HostError):
    """The host could not be connected to (network, timeout, refused)."""


class Cancelled(HostError):
    """Ctrl-C stopped this host's step (its remote process group was ended)."""


class AuthError(HostError):
    """The host answered but refused our credentials."""


class HostKeyError(HostError):
    """The host's key is unknown (strict) or changed since it was recorded."""


class BoundsError(HostError):
    """A host sent more than the controller takes: a banner without end, a line or a reply
    past its limit (provision/connection/bounds.py). Everything a host sends is bounded."""


class AgentError(HostError):
    """The remote agent failed or is not runnable (no python3, crashed, bad reply)."""


class TemplateError(ProvisionError):
    """A template failed to parse or render; `where` says which string/file.
    (Here, not in engine/templating.py, which re-exports it, so that engine/conditionals.py's
    error can be one without importing the templating engine.)"""


class UndefinedVariableError(TemplateError):
    """A template named a variable (or a key, an attribute) that is not defined. (Here beside
    TemplateError, re-exported by engine/templating.py, so that core_filters.py's `mandatory`
    raises it without importing the templating engine, which imports core_filters.)"""

    def __init__(
        self, variable: str, message: str, attribute: bool = False, source: str | None = None
    ) -> None:
        super().__init__(message)
        self.variable = variable
        self.attribute = attribute  # a missing key/attribute of a defined value
        self.source = source  # template file:line, when it happened in a template file
