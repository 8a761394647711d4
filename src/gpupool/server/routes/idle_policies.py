"""A tenant's idle policy for its interactive sessions (``interactive.idle_policy``): everyone
who sees the tenant reads it with the rule in force for each priority class and where that
rule was set; admins set any tenant's, tenant-admins those strictly below their own (as
quotas: a team does not loosen the rule its parent gave it)."""

from typing import Annotated

from fastapi import APIRouter, Request
from pydantic import BaseModel, Field, StringConstraints, model_validator
from sqlalchemy import select
from sqlalchemy.orm import Session

from gpupool.server.db.tables import PriorityClassRow, TenantRow
from gpupool.server.deps import Caller, Ctx, human, may_administer
from gpupool.server.errors import ApiError, not_found
from gpupool.server.interactive.cull_duty import read_tree
from gpupool.server.interactive.idle_policy import ANY_CLASS, IdleRule, resolve
from gpupool.server.schemas import Strict, TenantName
from gpupool.server.settings import Settings

router = APIRouter(prefix="/api/v1", tags=["tenants"])
MAX_S = 366 * 86400
ClassKey = Annotated[
    str,
    StringConstraints(min_length=1, max_length=100, pattern=r"^(\*|[A-Za-z0-9][A-Za-z0-9._-]*)$"),
]


class IdleRuleIn(Strict):
    timeout_s: int = Field(
        ...,
        ge=0,
        le=MAX_S,
        strict=True,
        description="Idle seconds before a session is released; 0: never",
    )
    warning_s: int = Field(
        600,
        ge=0,
        le=MAX_S,
        strict=True,
        description="Its terminals are warned this long before the release",
    )

    @model_validator(mode="after")
    def _warning_before_timeout(self) -> "IdleRuleIn":
        if self.timeout_s and self.warning_s >= self.timeout_s:
            raise ValueError(
                f"warning_s ({self.warning_s}) must be below timeout_s ({self.timeout_s})"
            )
        return self


class IdlePolicyIn(Strict):
    """The tenant's own rules, per priority class or ``*`` (any class); replaces them all
    (an empty map: it takes its parent's)."""

    rules: dict[ClassKey, IdleRuleIn] = Field(default_factory=dict, max_length=100)


class RuleInForce(BaseModel):
    priority_class: str
    timeout_s: int  # 0: never culled
    warning_s: int
    set_by: str  # a tenant, or "" for the server's default
    set_for: str  # the class it was set for, or "*"


class IdlePolicyOut(BaseModel):
    tenant: str
    own: dict[str, dict[str, int]]
    in_force: list[RuleInForce]


def _classes(s: Session) -> list[str]:
    return list(s.execute(select(PriorityClassRow.name).order_by(PriorityClassRow.name)).scalars())


def looser(rule: IdleRule, bound: IdleRule) -> bool:
    """Whether ``rule`` holds an idle session longer than ``bound`` does (0: never culled)."""
    if bound.off:
        return False
    return rule.off or rule.timeout_s > bound.timeout_s


def _no_looser(s: Session, settings: Settings, own: str, body: IdlePolicyIn) -> None:
    """A tenant-admin's rules below their own tenant: none may hold an idle session longer
    than the rule in force at their own tenant (which only those above them set), for any
    class it covers — else a sub-team they create would escape it (422 naming the rule)."""
    tree = read_tree(s)
    default = IdleRule(settings.session_idle_timeout_s, settings.session_idle_warning_s)
    classes = _classes(s)
    for key, rule_in in body.rules.items():
        rule = IdleRule(rule_in.timeout_s, rule_in.warning_s)
        for klass in classes if key == ANY_CLASS else [key]:
            bound = resolve(own, klass, tree.policies, tree.parents, default)
            if looser(rule, bound.rule):
                limit = f"{bound.rule.timeout_s} s"
                where = f"tenant {bound.tenant}" if bound.tenant else "the server's default"
                raise ApiError(
                    422,
                    f"rules.{key}: timeout_s {rule.timeout_s or '0 (never)'} is looser than "
                    f"the {limit} idle timeout {where} sets for {klass} above tenant {own}: a "
                    "tenant-admin may tighten it below, not loosen it (an admin may)",
                    f"rules.{key}",
                )


def _out(s: Session, settings: Settings, name: str) -> IdlePolicyOut:
    tree = read_tree(s)
    default = IdleRule(settings.session_idle_timeout_s, settings.session_idle_warning_s)
    in_force = []
    for klass in _classes(s):
        r = resolve(name, klass, tree.policies, tree.parents, default)
        in_force.append(
            RuleInForce(priority_class=klass, timeout_s=r.rule.timeout_s,
                        warning_s=r.rule.warning_s, set_by=r.tenant, set_for=r.priority_class)
        )  # fmt: skip
    own = {k: rule.as_dict() for k, rule in (tree.policies.get(name) or {}).items()}
    return IdlePolicyOut(tenant=name, own=own, in_force=in_force)


@router.get("/tenants/{name}/idle-policy", response_model=IdlePolicyOut)
def get_idle_policy(name: TenantName, ctx: Ctx, who: Caller) -> IdlePolicyOut:
    human(who)
    with ctx.db.read() as s:
        if s.get(TenantRow, name) is None or not who.sees(name):
            raise not_found(f"tenant {name}")
        return _out(s, ctx.settings, name)


@router.put("/tenants/{name}/idle-policy", response_model=IdlePolicyOut)
def set_idle_policy(
    name: TenantName, body: IdlePolicyIn, ctx: Ctx, who: Caller, request: Request
) -> IdlePolicyOut:
    """Replace the tenant's own idle rules (admins; tenant-admins below their own tenant)."""
    human(who)
    with ctx.db.write() as s:
        row = s.get(TenantRow, name, with_for_update=True)
        if row is None or not who.sees(name):
            raise not_found(f"tenant {name}")
        may_administer(who, name, "set idle policies")
        known = set(_classes(s))
        unknown = sorted(k for k in body.rules if k != ANY_CLASS and k not in known)
        if unknown:
            raise ApiError(
                422,
                f"rules: unknown priority class {unknown[0]!r} (known: "
                f"{', '.join(sorted(known))}, or * for any class)",
                "rules",
            )
        if not who.is_admin:  # a tenant-admin: no looser than what is above their tenant
            _no_looser(s, ctx.settings, who.tenant or "", body)
        row.idle_policy = {k: r.model_dump() for k, r in body.rules.items()}
        s.flush()
        out = _out(s, ctx.settings, name)
    request.state.audit_target = f"idle policy of {name}"
    return out
