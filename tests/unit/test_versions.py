"""Version skew between a server and its agents (issue 46): Kubernetes' kind of window —
agents up to two minor releases older, one newer (an upgrade may start with them); another
major release or more skew is refused; a version that does not parse is accepted as unknown."""

import pytest

from gpupool.model.versions import (
    AGENT_PRODUCT,
    Skew,
    judge_skew,
    user_agent,
    version_in,
)


@pytest.mark.parametrize(
    ("server", "agent", "skew"),
    [
        ("0.3.0", "0.3.7", Skew.SAME),
        ("0.3.1.dev12+gabc", "0.3.0", Skew.SAME),
        ("0.3.0", "0.1.4", Skew.SUPPORTED),  # two minors older
        ("0.3.0", "0.4.0.dev3+g1", Skew.SUPPORTED),  # one newer: agents first
        ("0.3.0", "0.0.9", Skew.REFUSED),  # three older
        ("0.3.0", "0.5.0", Skew.REFUSED),  # two newer
        ("1.0.0", "0.9.0", Skew.REFUSED),  # another major
        ("0.3.0", None, Skew.UNKNOWN),
        ("0.3.0", "not-a-version", Skew.UNKNOWN),
    ],
)
def test_the_skew_window(server, agent, skew):
    verdict = judge_skew(server, agent)
    assert verdict.skew is skew
    assert verdict.accepted is (skew is not Skew.REFUSED)


def test_a_refusal_says_both_versions_and_the_upgrade_order():
    text = judge_skew("0.5.0", "0.1.0").explain()
    assert "agent 0.1.0, server 0.5.0" in text and "4 minor version(s) older" in text
    assert "upgrade servers first" in text


def test_the_user_agent_carries_the_version_both_ways():
    header = user_agent(AGENT_PRODUCT, "0.2.1.dev3+gabc")
    assert version_in(header, AGENT_PRODUCT) == "0.2.1.dev3+gabc"
    assert version_in("python-httpx/0.28", AGENT_PRODUCT) is None  # an older agent
    assert version_in(header, "gpupool-cli") is None and version_in(None, AGENT_PRODUCT) is None
