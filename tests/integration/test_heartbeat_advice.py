"""The server advises its agents a heartbeat interval (half their lease, at most 10 s: half
the idle load of the old 5 s): an agent not configured with one follows it, a configured one
keeps its own, an older server's silence or a garbled advice leaves the old 5 s or a bounded
value, and a heartbeat that failed is tried again within seconds, not an interval later."""

import time

import pytest
from pydantic import ValidationError

from gpupool.agent.api import AgentApiError
from gpupool.server.settings import Settings
from tests.support.agents import (
    agent_thread,
    make_agent,
    no_workload_outlives_its_test,  # noqa: F401 - autouse: kills what a test left
    wait_for,
)
from tests.support.live import live_server


def test_the_advice_is_half_the_lease_at_most_ten_seconds_and_checked(tmp_path):
    assert Settings(data_dir=tmp_path).heartbeat_advice_s == 10.0  # lease 290 s: at most 10
    assert Settings(data_dir=tmp_path, heartbeat_timeout_s=30).heartbeat_advice_s == 10.0
    assert Settings(data_dir=tmp_path, heartbeat_timeout_s=3).heartbeat_advice_s == 1.0
    assert Settings(data_dir=tmp_path, agent_heartbeat_s=4).heartbeat_advice_s == 4.0
    with pytest.raises(ValidationError, match="agent_heartbeat_s must be at most half"):
        # lease 20 s: one lost heartbeat would end it
        Settings(data_dir=tmp_path, heartbeat_timeout_s=30, agent_heartbeat_s=15)


def test_an_agent_heartbeats_as_its_server_advises_unless_configured(tmp_path):
    settings = Settings(data_dir=tmp_path, log_json=False, heartbeat_timeout_s=3)
    with live_server(settings) as srv:
        admin = srv.admin()
        advised = make_agent(
            srv.url, srv.token("agent-n1", "agent", node="n1"), "n1", tmp_path / "a",
            heartbeat_s=None,
        )  # fmt: skip
        configured = make_agent(
            srv.url, srv.token("agent-n2", "agent", node="n2"), "n2", tmp_path / "b",
            heartbeat_s=0.5,
        )  # fmt: skip
        sent = {"n1": 0, "n2": 0}
        for agent in (advised, configured):
            real = agent.api.heartbeat

            def counted(devices, real=real, name=agent.name):
                sent[name] += 1
                return real(devices)

            agent.api.heartbeat = counted
        with agent_thread(advised), agent_thread(configured):
            for name in ("n1", "n2"):
                wait_for(name, lambda n=name: admin.get(f"/api/v1/nodes/{n}").status_code == 200)
            time.sleep(0.5)

            def beats(agent):  # over HTTP or on the agent's channel
                return sent[agent.name] + agent.channel.beats

            before = {a.name: beats(a) for a in (advised, configured)}
            time.sleep(4.0)
            counts = {a.name: beats(a) - before[a.name] for a in (advised, configured)}
        assert advised.heartbeat_s == 1.0 and configured.heartbeat_s == 0.5
        assert 3 <= counts["n1"] <= 5, counts  # every second (not the 5 s of old)
        assert 7 <= counts["n2"] <= 9, counts  # every half second, as configured


@pytest.mark.parametrize(
    ("answer", "interval"),
    [
        ({"state": "ready"}, 5.0),  # an older server advises nothing: 5 s as before
        ({"heartbeat_s": "10"}, 5.0),
        ({"heartbeat_s": True}, 5.0),
        ({"heartbeat_s": 1e9}, 60.0),
        ({"heartbeat_s": 0.001}, 0.2),
        ({"heartbeat_s": 10}, 10.0),
    ],
)
def test_advice_from_an_older_server_or_a_garbled_one_stays_bounded(tmp_path, answer, interval):
    agent = make_agent("http://127.0.0.1:9", "t", "n1", tmp_path / "a", heartbeat_s=None)
    agent._renew(answer, time.monotonic())
    assert agent.heartbeat_s == interval
    agent.api.close()


def test_a_failed_heartbeat_is_tried_again_within_seconds(tmp_path):
    agent = make_agent("http://127.0.0.1:9", "t", "n1", tmp_path / "a", heartbeat_s=None)
    agent._renew({"heartbeat_s": 10.0}, time.monotonic())

    def unreachable(devices):
        raise AgentApiError("ConnectError: network unreachable (test)")

    agent.api.heartbeat = unreachable
    with pytest.raises(AgentApiError):
        agent.heartbeat()
    assert agent._next_heartbeat - time.monotonic() <= 2.0
    agent.api.heartbeat = lambda devices: {"name": "n1", "state": "ready", "heartbeat_s": 10.0}
    agent.heartbeat()
    assert agent._next_heartbeat - time.monotonic() > 9.0
    agent.api.close()
