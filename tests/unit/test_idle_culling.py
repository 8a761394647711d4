"""Idle culling decided (``server.interactive.culling`` and ``idle_policy``), from hand-made
facts: a session is warned at its timeout less the warning, released at the announced time,
kept by input or GPU activity (which withdraws a warning), warned again in a later idle
stretch, and its rule is the nearest tenant's up the tree, the class's before any class's."""

from gpupool.server.idle import gpu_active
from gpupool.server.interactive.culling import IDLE_CULLED, Act, IdleFacts, decide, words
from gpupool.server.interactive.idle_policy import (
    ANY_CLASS,
    SERVER,
    IdleRule,
    read_policy,
    resolve,
)

T0 = 1_000_000.0
HOUR_RULE = IdleRule(timeout_s=3600, warning_s=600)  # warned after 50 min, released at 60


def facts(
    started: float = T0,
    active: float | None = None,
    typed: float | None = None,
    warned: float | None = None,
    release: float | None = None,
    tenant: str = "alpha",
    klass: str = "dev-test",
) -> IdleFacts:
    return IdleFacts(7, 70, tenant, klass, started, active, typed, warned, release)


def one(f: IdleFacts, now: float, rule: IdleRule = HOUR_RULE):
    out = decide([f], lambda _: resolve(f.tenant, f.priority_class, {}, {}, rule), now)
    assert len(out) <= 1
    return out[0] if out else None


def test_a_fresh_session_is_left_alone_until_the_warning_time():
    assert one(facts(), T0 + 10) is None
    assert one(facts(), T0 + 2999) is None
    warn = one(facts(), T0 + 3000)
    assert warn is not None and warn.act is Act.WARN
    assert warn.release_at == T0 + 3600  # the timeout, the warning's length after


def test_warned_then_released_at_the_announced_time_not_before():
    f = facts(warned=T0 + 3000, release=T0 + 3600)
    assert one(f, T0 + 3599) is None  # warned once per stretch: nothing new meanwhile
    release = one(f, T0 + 3600)
    assert release is not None and release.act is Act.RELEASE
    reason = release.reason(T0 + 3600)
    assert reason.startswith(IDLE_CULLED + ":"), reason
    assert "for 60 min (idle timeout 60 min, the server's default (any class))" in reason, reason


def test_input_after_the_warning_withdraws_it_and_a_later_stretch_is_warned_anew():
    f = facts(warned=T0 + 3000, release=T0 + 3600, typed=T0 + 3100)
    withdraw = one(f, T0 + 3600)  # at the release time: typing kept it
    assert withdraw is not None and withdraw.act is Act.WITHDRAW
    cleared = facts(typed=T0 + 3100)  # the warning withdrawn
    assert one(cleared, T0 + 3100 + 2999) is None
    again = one(cleared, T0 + 3100 + 3000)
    assert again is not None and again.act is Act.WARN
    assert again.release_at == T0 + 3100 + 3600


def test_gpu_activity_resets_the_clock_as_input_does():
    f = facts(active=T0 + 1800)
    assert one(f, T0 + 3000) is None
    assert one(f, T0 + 1800 + 3000).act is Act.WARN
    warned = facts(warned=T0 + 3000, release=T0 + 3600, active=T0 + 3300)
    assert one(warned, T0 + 3700).act is Act.WITHDRAW


def test_a_session_idle_long_before_the_policy_is_still_warned_a_full_warning_ahead():
    """Set on a session idle for hours already, or a leader away: a warning first, and the
    release a full warning later — never a release out of the blue."""
    late = one(facts(), T0 + 5 * 3600)
    assert late.act is Act.WARN and late.release_at == T0 + 5 * 3600 + 600


def test_an_off_rule_never_culls_and_withdraws_a_standing_warning():
    off = IdleRule(0, 0)
    assert one(facts(), T0 + 100 * 3600, off) is None
    withdrawn = one(facts(warned=T0 + 3000, release=T0 + 3600), T0 + 3600, off)
    assert withdrawn.act is Act.WITHDRAW


def test_no_warning_asked_releases_at_the_timeout():
    rule = IdleRule(600, 0)
    assert one(facts(), T0 + 599, rule) is None
    assert one(facts(), T0 + 600, rule).act is Act.RELEASE


def test_the_nearest_tenant_up_the_tree_sets_the_rule_its_class_before_any_class():
    parents = {"org": None, "team": "org", "sub": "team"}
    policies = {
        "org": {ANY_CLASS: IdleRule(7200, 600), "dev-test": IdleRule(1800, 300)},
        "team": {ANY_CLASS: IdleRule(3600, 600)},
        "sub": {},
    }
    server = IdleRule(0, 600)
    # team's own any-class rule is nearer than org's dev-test rule
    r = resolve("sub", "dev-test", policies, parents, server)
    assert (r.rule, r.tenant, r.priority_class) == (IdleRule(3600, 600), "team", ANY_CLASS)
    r = resolve("org", "dev-test", policies, parents, server)
    assert (r.rule, r.tenant, r.priority_class) == (IdleRule(1800, 300), "org", "dev-test")
    r = resolve("org", "training", policies, parents, server)
    assert r.rule == IdleRule(7200, 600) and r.source() == "tenant org (any class)"
    r = resolve("elsewhere", "training", policies, {"elsewhere": None}, server)
    assert r.tenant == SERVER and r.rule.off and r.source().startswith("the server's")
    # a team's explicit off keeps its sessions whatever its parent says
    policies["team"] = {"dev-test": IdleRule(0, 0)}
    assert resolve("sub", "dev-test", policies, parents, server).rule.off
    assert resolve("sub", "training", policies, parents, server).rule == IdleRule(7200, 600)


def test_per_class_and_per_team_rules_decide_different_sessions_apart():
    policies = {"alpha": {"dev-test": IdleRule(600, 60)}, "beta": {ANY_CLASS: IdleRule(0, 0)}}
    parents = {"alpha": None, "beta": None}
    sessions = [
        IdleFacts(1, 10, "alpha", "dev-test", T0, None, None, None, None),
        IdleFacts(2, 20, "alpha", "training", T0, None, None, None, None),
        IdleFacts(3, 30, "beta", "dev-test", T0, None, None, None, None),
    ]
    out = decide(
        sessions,
        lambda f: resolve(f.tenant, f.priority_class, policies, parents, IdleRule(3600, 600)),
        T0 + 700,
    )
    assert [(d.facts.alloc_id, d.act) for d in out] == [(1, Act.WARN)]


def test_a_stored_policy_reads_back_and_bad_entries_are_left_out():
    raw = {"*": {"timeout_s": 60, "warning_s": 10}, "x": {"timeout_s": "1"}, "y": 3}
    assert read_policy(raw) == {"*": IdleRule(60, 10)}
    assert read_policy(None) == {}


def test_gpu_activity_is_utilisation_or_memory_moving_and_unknown_counts_as_active():
    assert gpu_active(50.0, 1000, 1000)
    assert not gpu_active(1.0, 1000, 1000)
    assert not gpu_active(1.0, 1000, 1040)  # under the memory step
    assert gpu_active(1.0, 1000, 2000)
    assert gpu_active(None, 1000, 1000)  # cannot be seen: never taken for idle
    assert not gpu_active(0.0, None, None)


def test_durations_read_as_people_say_them():
    assert [words(s) for s in (45, 600, 3600, 7500)] == ["45 s", "10 min", "60 min", "2 h 5 min"]
