"""Idle timeouts of interactive sessions, per tenant and priority class (docs/interactive.md,
"Idle culling"). A tenant's own policy maps priority classes — or ``*``, any class — to a
rule; a tenant without a rule for a session's class takes its parent's, up the tree, then the
server's (``session_idle_timeout_s``, off unless set). At each level a rule for the class
itself comes before the ``*`` one; a timeout of 0 is "never culled" (a team that keeps its
shells past its parent's policy must be given that by whoever administers it)."""

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

ANY_CLASS = "*"
SERVER = ""  # a rule's source when no tenant on the way up set one


@dataclass(frozen=True, slots=True)
class IdleRule:
    """``timeout_s``: idle seconds before a session is released (0: never); ``warning_s``:
    how long before that its terminals are warned."""

    timeout_s: int
    warning_s: int

    @property
    def off(self) -> bool:
        return self.timeout_s <= 0

    @property
    def warn_after_s(self) -> int:
        """Idle seconds after which the warning goes out."""
        return max(0, self.timeout_s - self.warning_s)

    def as_dict(self) -> dict[str, int]:
        return {"timeout_s": self.timeout_s, "warning_s": self.warning_s}


@dataclass(frozen=True, slots=True)
class Resolved:
    """The rule in force for a session, and where it was set: ``tenant`` (``SERVER``: the
    server's default) and ``priority_class`` (``ANY_CLASS``: for any class)."""

    rule: IdleRule
    tenant: str
    priority_class: str

    def source(self) -> str:
        where = "the server's default" if self.tenant == SERVER else f"tenant {self.tenant}"
        what = "any class" if self.priority_class == ANY_CLASS else f"class {self.priority_class}"
        return f"{where} ({what})"


Policy = Mapping[str, IdleRule]  # priority class (or ANY_CLASS) -> rule


def read_policy(raw: Mapping[str, Any] | None) -> dict[str, IdleRule]:
    """A tenant's stored policy (``TenantRow.idle_policy``); entries that do not read are
    left out (the API only ever stores ones that do)."""
    out: dict[str, IdleRule] = {}
    for klass, rule in (raw or {}).items():
        if isinstance(rule, Mapping):
            timeout, warning = rule.get("timeout_s"), rule.get("warning_s")
            if isinstance(timeout, int) and isinstance(warning, int):
                out[str(klass)] = IdleRule(timeout, warning)
    return out


def resolve(
    tenant: str,
    priority_class: str,
    policies: Mapping[str, Policy],
    parents: Mapping[str, str | None],
    default: IdleRule,
) -> Resolved:
    """The rule for a session of ``tenant`` in ``priority_class``: the nearest tenant up the
    tree with a rule for the class or for any class (the class's first), else ``default``."""
    seen: set[str] = set()
    at: str | None = tenant
    while at is not None and at not in seen:
        seen.add(at)
        own = policies.get(at) or {}
        for key in (priority_class, ANY_CLASS):
            if key in own:
                return Resolved(own[key], at, key)
        at = parents.get(at)
    return Resolved(default, SERVER, ANY_CLASS)
