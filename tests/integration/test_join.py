"""The join flow (issue 46): an admin makes a bootstrap token, a new server trades it once for
a credential of its own node, and removing the node revokes that credential."""

import stat
import sys
import threading
from pathlib import Path

import httpx
import pytest

from tests.support.cli import gpupool
from tests.support.cluster import node_body, ok


def _env(srv) -> dict[str, str]:
    return {"GPUPOOL_SERVER": srv.url, "GPUPOOL_TOKEN": srv.admin_token}


def _bootstrap(srv, **body) -> str:
    return ok(srv.admin().post("/api/v1/join-tokens", json=body), 201)["token"]


def _join(srv, token: str, node: str) -> httpx.Response:
    # httpx's 5-s default once ran out on a machine loaded by other suites (a write per try)
    body = {"token": token, "node": node}
    return httpx.post(f"{srv.url}/api/v1/join", json=body, timeout=30)


def _register(srv, token: str, node: str) -> int:
    body = node_body(node, cards=1)
    headers = {"Authorization": f"Bearer {token}"}
    return httpx.post(f"{srv.url}/api/v1/nodes", json=body, headers=headers).status_code


def test_a_new_server_joins_with_the_printed_command_and_the_token_is_spent(
    sqlite_server, tmp_path
):
    made = gpupool("node", "token", "create", "--ttl", "30m", env=_env(sqlite_server))
    assert made.returncode == 0, made.stderr
    command = made.stdout.splitlines()[-1].split()
    assert command[:2] == ["gpupool", "join"] and command[2] == sqlite_server.url
    token = command[command.index("--token") + 1]
    assert "--ca-hash" not in command  # plain HTTP: nothing to pin
    env_file, ca_file = tmp_path / "etc" / "agent.env", tmp_path / "etc" / "ca.pem"
    joined = gpupool("join", sqlite_server.url, "--token", token, "--name", "gpu07",
                     "--env-file", str(env_file), "--ca-file", str(ca_file))  # fmt: skip
    assert joined.returncode == 0, joined.stderr
    assert "node gpu07 joined" in joined.stdout and not ca_file.exists()
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
    settings = dict(line.split("=", 1) for line in env_file.read_text().splitlines())
    assert settings["GPUPOOL_SERVER"] == sqlite_server.url and settings["GPUPOOL_NODE"] == "gpu07"
    credential = settings["GPUPOOL_AGENT_TOKEN"]
    assert _register(sqlite_server, credential, "gpu07") == 200
    assert _register(sqlite_server, credential, "gpu08") == 403  # its own node only
    again = gpupool("join", sqlite_server.url, "--token", token, "--name", "gpu09",
                    "--env-file", str(tmp_path / "other.env"))  # fmt: skip
    assert again.returncode == 2 and "spent bootstrap token" in again.stderr
    listed = ok(sqlite_server.admin().get("/api/v1/join-tokens"))
    assert [t["uses_left"] for t in listed] == [0] and "token" not in listed[0]


def test_a_token_joins_its_node_only_until_it_expires_and_never_a_node_with_a_credential(
    sqlite_server,
):
    scoped = _bootstrap(sqlite_server, node="gpu01", uses=5)
    refused = _join(sqlite_server, scoped, "gpu02")
    assert refused.status_code == 401 and "joins node gpu01 only" in refused.json()["detail"]
    assert _join(sqlite_server, scoped, "gpu01").status_code == 200
    # a second credential for a node that has one: a leaked token cannot take a running node
    twice = _join(sqlite_server, scoped, "gpu01")
    assert twice.status_code == 422 and "gpupool node remove gpu01" in twice.json()["detail"]
    with sqlite_server.ctx.db.write() as s:
        from gpupool.server.db.tables import JoinTokenRow

        for row in s.query(JoinTokenRow):
            row.expires_at = 1.0
    assert _join(sqlite_server, scoped, "gpu03").status_code == 401
    assert _join(sqlite_server, "gpj_made-up", "gpu03").status_code == 401
    for bad in ({"token": scoped}, {"token": scoped, "node": "-x"}, {"token": "", "node": "a"}):
        assert httpx.post(f"{sqlite_server.url}/api/v1/join", json=bad).status_code == 422


def test_guessing_bootstrap_tokens_is_throttled(sqlite_server):
    codes = [_join(sqlite_server, f"gpj_guess{i}", "gpu01").status_code for i in range(40)]
    assert codes[0] == 401 and codes[-1] == 429


def _race(srv, token: str, nodes: list[str]) -> list[int]:
    """Join as each of ``nodes`` at once, one thread each; the status codes."""
    codes: list[int] = []
    racers = [
        threading.Thread(target=lambda n=n: codes.append(_join(srv, token, n).status_code))
        for n in nodes
    ]
    for t in racers:
        t.start()
    for t in racers:
        t.join()
    return codes


def test_two_servers_racing_for_one_use_get_one_credential(server):
    codes = _race(server, _bootstrap(server, uses=1), ["gpu01", "gpu02", "gpu03", "gpu04"])
    assert sorted(codes) == [200, 401, 401, 401]


def test_two_servers_joining_as_one_name_get_one_credential(server):
    codes = _race(server, _bootstrap(server, uses=4), ["gpu01"] * 4)
    assert codes.count(200) == 1 and set(codes) <= {200, 409, 422}, codes


def test_removing_a_node_waits_for_its_work_and_revokes_its_credential(sqlite_server, tmp_path):
    from tests.support.cluster import seed_cluster

    admin = sqlite_server.admin()
    seed_cluster(admin, nodes=0, tenants={"algo": 1})
    credential = _join(sqlite_server, _bootstrap(sqlite_server), "gpu01").json()["token"]
    assert _register(sqlite_server, credential, "gpu01") == 200
    job = ok(admin.post("/api/v1/jobs", json={"request": "gpu=1", "tenant": "algo",
                                               "command": ["sleep", "60"]}), 201)  # fmt: skip
    sqlite_server.cycle()
    busy = gpupool("node", "remove", "gpu01", env=_env(sqlite_server))
    assert busy.returncode == 2 and "1 allocation(s) still run there" in busy.stderr
    assert ok(admin.get("/api/v1/nodes/gpu01"))["schedulable"] is False  # drained meanwhile
    ok(admin.post(f"/api/v1/jobs/{job['id']}/cancel"))
    done = gpupool("node", "remove", "gpu01", env=_env(sqlite_server))
    assert done.returncode == 0, done.stderr
    assert admin.get("/api/v1/nodes/gpu01").status_code == 404
    assert _register(sqlite_server, credential, "gpu01") == 401  # it cannot come back by itself
    again = _join(sqlite_server, _bootstrap(sqlite_server), "gpu01")
    assert again.status_code == 200  # it joins again instead


@pytest.mark.parametrize("ttl", ["0m", "soon", "2026-12-01"])
def test_a_ttl_that_is_not_a_duration_is_refused_by_name(sqlite_server, ttl):
    out = gpupool("node", "token", "create", "--ttl", ttl, env=_env(sqlite_server))
    assert out.returncode == 2 and "ttl:" in out.stderr and "Traceback" not in out.stderr


def test_join_installs_and_starts_the_agents_unit(sqlite_server, tmp_path):
    """--install-service (issue 46: the join flow "installs/starts its service", as kubeadm
    join starts the kubelet): the shipped unit with this installation's program, then
    systemctl daemon-reload and enable --now — here a systemctl that records its calls."""
    systemctl = _systemctl(tmp_path, "systemctl", "running")
    calls = tmp_path / "systemctl.calls"
    token = _bootstrap(sqlite_server)
    units = tmp_path / "units"
    recording = {"GPUPOOL_SYSTEMCTL": str(systemctl)}
    joined = gpupool("join", sqlite_server.url, "--token", token, "--name", "gpu11",
                     "--env-file", str(tmp_path / "agent.env"), "--install-service",
                     "--unit-dir", str(units), env=recording)  # fmt: skip
    assert joined.returncode == 0, joined.stderr
    assert calls.read_text().splitlines() == [
        "is-system-running", "daemon-reload", "enable --now gpupool-agent",
    ]  # fmt: skip
    unit = (units / "gpupool-agent.service").read_text()
    here = Path(sys.executable).with_name("gpupool")
    assert f"ExecStart={here} agent --server ${{GPUPOOL_SERVER}}" in unit
    assert "KillMode=process" in unit  # the shipped unit, not a copy of it
    failing = _systemctl(tmp_path, "failing", "running", "Failed to connect to bus\\n")
    again = gpupool("join", sqlite_server.url, "--token", _bootstrap(sqlite_server), "--name",
                    "gpu12", "--env-file", str(tmp_path / "b.env"), "--install-service",
                    "--unit-dir", str(units), env={"GPUPOOL_SYSTEMCTL": str(failing)})  # fmt: skip
    assert again.returncode == 2 and "Traceback" not in again.stderr
    assert "systemctl daemon-reload failed (Failed to connect to bus)" in again.stderr


def _systemctl(tmp_path, name: str, state: str, fail_reload: str = "") -> Path:
    """A stand-in systemctl: ``is-system-running`` answers ``state`` (exit 0 only for
    running, as systemd's does); ``daemon-reload`` fails with ``fail_reload`` when given."""
    calls = tmp_path / f"{name}.calls"
    script = tmp_path / name
    code = 0 if state == "running" else 1
    reload = f'printf "{fail_reload}" >&2; exit 1' if fail_reload else "true"
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$@" >> {calls}\n'
        f'case "$1" in is-system-running) echo {state}; exit {code};;\n'
        f"  daemon-reload) {reload};; esac\n"
    )
    script.chmod(0o755)
    return script


def test_install_service_checks_systemd_runs_before_the_token_is_spent(sqlite_server, tmp_path):
    """Issue 59, finding 7: on a host without systemd running (a container, a chroot) the
    join spent the bootstrap token and failed only after; docs/operations.md says it is
    checked first."""
    offline = _systemctl(tmp_path, "offline", "offline")
    token = _bootstrap(sqlite_server)
    refused = gpupool("join", sqlite_server.url, "--token", token, "--name", "gpu13",
                      "--env-file", str(tmp_path / "agent.env"), "--install-service",
                      "--unit-dir", str(tmp_path / "units"),
                      env={"GPUPOOL_SYSTEMCTL": str(offline)})  # fmt: skip
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "systemd is not running on this host" in refused.stderr, refused.stderr
    assert "offline" in refused.stderr
    listed = ok(sqlite_server.admin().get("/api/v1/join-tokens"))
    assert [t["uses_left"] for t in listed] == [1]  # not spent
    assert not (tmp_path / "agent.env").exists() and not (tmp_path / "units").exists()


def test_installed_unit_reads_the_env_file_given_and_errors_keep_their_lines(
    sqlite_server, tmp_path
):
    """The unit's EnvironmentFile is the --env-file the join wrote (it named
    /etc/gpupool/agent.env whatever was given), and a failing systemctl's lines read as
    lines, not as \\x0a escapes."""
    running = _systemctl(tmp_path, "running", "running")
    env_file = tmp_path / "etc" / "node.env"
    units = tmp_path / "units"
    joined = gpupool("join", sqlite_server.url, "--token", _bootstrap(sqlite_server), "--name",
                     "gpu14", "--env-file", str(env_file), "--install-service",
                     "--unit-dir", str(units), env={"GPUPOOL_SYSTEMCTL": str(running)})  # fmt: skip
    assert joined.returncode == 0, joined.stderr
    unit = (units / "gpupool-agent.service").read_text()
    assert f"EnvironmentFile={env_file}\n" in unit, unit
    assert "/etc/gpupool/agent.env" not in unit.split("[Service]")[1]
    failing = _systemctl(tmp_path, "failing", "running", "Failed to reload\\nBus is down\\n")
    again = gpupool("join", sqlite_server.url, "--token", _bootstrap(sqlite_server), "--name",
                    "gpu15", "--env-file", str(tmp_path / "b.env"), "--install-service",
                    "--unit-dir", str(units), env={"GPUPOOL_SYSTEMCTL": str(failing)})  # fmt: skip
    assert again.returncode == 2 and "\\x0a" not in again.stderr, again.stderr
    assert "Failed to reload; Bus is down" in again.stderr, again.stderr


def test_a_removed_nodes_agent_stops_saying_so_and_its_host_joins_again(sqlite_server, tmp_path):
    """Issue 59, finding 7: the agent of a removed node kept calling with its revoked token
    until its host was rate-limited, so the join that would bring the node back got "429 ...
    retry in 0 s". It stops at the first refusal, saying the node was removed."""
    from tests.support.agents import make_agent, wait_for

    credential = _join(sqlite_server, _bootstrap(sqlite_server), "gpu21").json()["token"]
    agent = make_agent(sqlite_server.url, credential, "gpu21", tmp_path / "agent")
    stop = threading.Event()
    running = threading.Thread(target=agent.run, args=(stop,), daemon=True)
    running.start()
    try:
        admin = sqlite_server.admin()
        wait_for("gpu21 ready", lambda: admin.get("/api/v1/nodes/gpu21").status_code == 200)
        removed = gpupool("node", "remove", "gpu21", env=_env(sqlite_server))
        assert removed.returncode == 0, removed.stderr
        running.join(timeout=20)
        assert not running.is_alive(), "the removed node's agent still runs"
    finally:
        stop.set()
        running.join(timeout=30)
    assert agent.refusal is not None
    assert "node gpu21 was removed" in agent.refusal, agent.refusal
    again = _join(sqlite_server, _bootstrap(sqlite_server), "gpu21")
    assert again.status_code == 200, again.text  # not rate-limited by the agent's calls
