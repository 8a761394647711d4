"""Idle culling, decided (pure): which interactive sessions to warn, which to release, whose
warning to withdraw (docs/interactive.md, "Idle culling").

A session is idle since the latest of: its workload's start, the last GPU activity on its
cards (telemetry: utilisation at or over ``IDLE_UTIL_PCT``, or memory in use moving), and
the last time a person opened or typed into one of its terminals. Idle for its rule's
timeout less the warning, it is warned (once per idle stretch: its terminals print when it
will be released); still idle at that time, it is released. Activity after the warning
withdraws it, and a later stretch is warned anew. A warning always comes ``warning_s``
before the release, also when the policy is set on a session idle for longer already, or a
leader was away: nobody loses a shell without having been told."""

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum

from gpupool.server.interactive.idle_policy import Resolved

IDLE_CULLED = "idle-culled"  # the release reason's first word (typed: ``CullDecision.reason``)
ACTOR = "idle-culling"


class Act(StrEnum):
    WARN = "warn"
    RELEASE = "release"
    WITHDRAW = "withdraw"  # activity after the warning, or the policy turned off


@dataclass(frozen=True, slots=True)
class IdleFacts:
    """What the culling reads of one live interactive allocation whose workload started."""

    alloc_id: int
    job_id: int
    tenant: str
    priority_class: str
    started_at: float
    active_at: float | None
    input_at: float | None
    warned_at: float | None
    release_at: float | None

    @property
    def idle_since(self) -> float:
        return max(self.started_at, self.active_at or 0.0, self.input_at or 0.0)

    @property
    def clock(self) -> tuple[float | None, float | None, float | None]:
        """What a decision rests on: applied only while these are unchanged."""
        return self.active_at, self.input_at, self.warned_at


@dataclass(frozen=True, slots=True)
class CullDecision:
    facts: IdleFacts
    act: Act
    policy: Resolved
    release_at: float | None = None  # WARN: when it will be released if still idle

    @property
    def idle_s(self) -> float:
        """Idle seconds at the release (``release_at``) or the warning."""
        return (self.release_at or self.facts.idle_since) - self.facts.idle_since

    def reason(self, now: float) -> str:
        """A release's reason, as the job and its allocation keep it."""
        rule = self.policy.rule
        idle = now - self.facts.idle_since
        return (
            f"{IDLE_CULLED}: no terminal input and no GPU activity for {words(idle)} (idle "
            f"timeout {words(rule.timeout_s)}, {self.policy.source()})"
        )


def words(seconds: float) -> str:
    """A duration as people say it: 45 s, 12 min, 2 h 5 min."""
    s = round(max(0.0, seconds))
    if s < 120:
        return f"{s} s"
    minutes = s // 60
    if minutes < 120:
        return f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if minutes else f"{hours} h"


def decide(
    sessions: Iterable[IdleFacts], rule_of: Callable[[IdleFacts], Resolved], now: float
) -> list[CullDecision]:
    """What to do now with each session (those needing nothing left out)."""
    out: list[CullDecision] = []
    for f in sessions:
        policy = rule_of(f)
        decision = _one(f, policy, now)
        if decision is not None:
            out.append(decision)
    return out


def _one(f: IdleFacts, policy: Resolved, now: float) -> CullDecision | None:
    rule, since = policy.rule, f.idle_since
    warned = f.warned_at is not None and f.warned_at >= since and f.release_at is not None
    if rule.off or (f.warned_at is not None and not warned):
        # culling off for it, or it was active after its warning: the warning is withdrawn
        return CullDecision(f, Act.WITHDRAW, policy) if f.warned_at is not None else None
    if warned:
        assert f.release_at is not None
        return CullDecision(f, Act.RELEASE, policy) if now >= f.release_at else None
    if now - since < rule.warn_after_s:
        return None
    if rule.warning_s <= 0 and now - since >= rule.timeout_s:
        return CullDecision(f, Act.RELEASE, policy)  # no warning asked for
    release_at = max(since + rule.timeout_s, now + rule.warning_s)
    return CullDecision(f, Act.WARN, policy, release_at)
