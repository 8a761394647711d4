"""A shell on a slice (docs/interactive.md), with a real server on a socket, a real agent and
real processes: a terminal opened through the server's WebSocket runs in the job's sandbox
with the slice's variables, follows its window's size, takes Ctrl-C, returns exit codes,
outlives a dropped link on either side of the server and is attached again, and is reached
from the command line (``gpupool shell``, ``exec``, ``srun --pty``) as Slurm users expect."""

import contextlib
import os
import pty
import select
import signal
import subprocess
import sys
import time

import pytest

from gpupool.agent.processes import children
from tests.support.agents import (
    agent_thread,
    make_agent,
    no_namespace_outlives_its_test,  # noqa: F401 - used through usefixtures
    no_workload_outlives_its_test,  # noqa: F401 - autouse: kills what a test left
    wait_for,
    wait_for_cards,
)
from tests.support.cluster import ok
from tests.support.live import live_server
from tests.support.sessions import Term, running_session, session_pool, shell


@pytest.fixture
def pool(tmp_path):
    """A server with its scheduler, tenant alpha, and node n1 (two simulated A100s) whose
    agent runs workloads as the test's user."""
    from gpupool.server.settings import Settings

    settings = Settings(data_dir=tmp_path / "data", log_json=False, cycle_interval_s=0.2)
    with session_pool(settings, tmp_path / "agent") as pool:
        yield pool


def test_a_terminal_runs_in_the_slice_with_its_size_ctrl_c_and_exit_code(pool):
    srv, _ = pool
    job = running_session(srv.admin(), "alpha")
    member = srv.token("ann", "member", "alpha")
    term = shell(srv.url, member, job["id"], cols=123, rows=45)
    term.type('echo "vars $GPUPOOL_JOB_ID $CUDA_VISIBLE_DEVICES $GPUPOOL_TERMINAL"; stty size\n')
    text = term.read_until(r"45 123")
    assert f"vars {job['id']} GPU-sim-n1-" in text, text
    term.control(t="resize", cols=90, rows=20)
    term.type("stty size\n")
    term.read_until(r"20 90")
    term.type("sleep 30\n")
    time.sleep(0.5)
    term.type("\x03")  # Ctrl-C, as a byte: the terminal's line discipline interrupts the sleep
    term.type("echo after-sleep $?\n")
    term.read_until(r"after-sleep 130")
    term.type("exit 7\n")
    assert term.wait_exit() == 7


def test_a_terminal_is_told_why_it_ends_at_its_time_limit_and_on_a_cancel(pool):
    """The hostile review saw a terminal end at its job's time limit with exit 137 and no
    word why: the agent told the session's link a round after the stop, when the job's
    processes (its terminals too) were gone already."""
    srv, _ = pool
    member = srv.token("ann", "member", "alpha")
    limited = running_session(srv.admin(), "alpha", max_runtime_s=4)
    term = shell(srv.url, member, limited["id"])
    text = term.read_until(r"this terminal ends now", timeout=30)
    assert "max runtime 4 s exceeded" in text, text[-500:]
    other = running_session(srv.admin(), "alpha")
    term = shell(srv.url, member, other["id"])
    ok(srv.admin().post(f"/api/v1/jobs/{other['id']}/cancel"))
    term.read_until(r"this terminal ends now", timeout=30)


def test_a_dropped_link_on_either_side_keeps_the_terminal_for_the_next_attach(pool):
    srv, agent = pool
    job = running_session(srv.admin(), "alpha")
    member = srv.token("ann", "member", "alpha")
    term = shell(srv.url, member, job["id"])
    term.type("marker=kept-$$; echo ready $marker\n")
    term.read_until(r"ready kept-\d+")
    term.type("for i in 1 2 3 4 5 6; do echo tick $i; sleep 0.3; done\n")
    term.read_until(r"tick 1")
    term.ws.close()  # the person's link drops: the terminal runs on, printing
    time.sleep(2.5)
    again = Term(srv.url, member, job["id"], attach="last")
    assert again.number == term.number
    text = again.read_until(r"tick 6")  # what it printed while nobody was attached, replayed
    assert "tick 3" in text and "tick 4" in text, text
    again.type("echo still $marker\n")
    again.read_until(r"still kept-\d+")

    link = agent.sessions.links[job["allocation"]["id"]]
    link.ws.close()  # now the node's side: the agent's tunnel drops and it dials again
    wait_for("the closing", lambda: any(f.get("t") == "closed" for f in _drain(again)), 10)
    wait_for("the tunnel back", lambda: link.up.is_set(), 20)
    third = Term(srv.url, member, job["id"], attach=term.number)
    third.type("echo third $marker\n")
    third.read_until(r"third kept-\d+")
    third.type("exit 3\n")
    assert third.wait_exit() == 3


def _drain(term: Term) -> list[dict]:
    with contextlib.suppress(Exception):
        term._take(term.ws.recv(timeout=0.2))
    return term.frames


def _cli(srv, token: str, *args: str, typed: bytes = b"", timeout: float = 60) -> tuple[int, str]:
    """gpupool ARGS... on a pseudo-terminal of its own (as a person runs it), typing
    ``typed`` once it prints; its exit code and what it printed."""
    env = {**os.environ, "GPUPOOL_SERVER": srv.url, "GPUPOOL_TOKEN": token,
           "GPUPOOL_CONFIG_DIR": "/nonexistent-gpupool-config", "TERM": "xterm"}  # fmt: skip
    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover - the child
        os.execve(sys.executable, [sys.executable, "-m", "gpupool.cli.main", *args], env)
    out = b""
    deadline = time.monotonic() + timeout
    sent = False
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        if typed and not sent and (b"$ " in out or b"# " in out):  # its prompt
            os.write(fd, typed)
            sent = True
    done, status = os.waitpid(pid, os.WNOHANG)
    until = time.monotonic() + 10  # its output closed: it is on its way out
    while not done and time.monotonic() < until:
        time.sleep(0.1)
        done, status = os.waitpid(pid, os.WNOHANG)
    if not done:  # it hangs: killed, and the test says what it printed
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os.close(fd)
        raise AssertionError(f"gpupool {' '.join(args)} did not end: {out.decode()[-2000:]!r}")
    os.close(fd)
    return os.waitstatus_to_exitcode(status), out.decode(errors="replace")


def test_gpupool_shell_exec_and_srun_pty_from_the_command_line(pool):
    srv, _ = pool
    admin = srv.admin()
    job = running_session(admin, "alpha")
    member = srv.token("ann", "member", "alpha")
    code, text = _cli(srv, member, "shell", str(job["id"]),
                      typed=b"PS1='$ '; echo in-$GPUPOOL_JOB_ID; exit 6\n")  # fmt: skip
    assert code == 6, text
    assert f"in-{job['id']}" in text, text

    env = {**os.environ, "GPUPOOL_SERVER": srv.url, "GPUPOOL_TOKEN": member}
    done = subprocess.run(
        [sys.executable, "-m", "gpupool.cli.main", "exec", str(job["id"]), "--",
         "sh", "-c", "echo out-$GPUPOOL_JOB_ID; echo err >&2; exit 4"],
        env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 4, done
    assert done.stdout.strip() == f"out-{job['id']}" and done.stderr.strip() == "err", done

    code, text = _cli(srv, member, "srun", "--gres=gpu:1", "--pty", "bash", "--norc", "-i",
                      typed=b"PS1='$ '; echo srun-$GPUPOOL_JOB_ID-$CUDA_VISIBLE_DEVICES; exit 5\n",
                      )  # fmt: skip
    assert code == 5, text
    srun_job = int(text.split("srun-")[-1].split("-")[0])
    assert "GPU-sim-n1-" in text.split("srun-")[-1], text
    after = ok(admin.get(f"/api/v1/jobs/{srun_job}"))
    assert after["state"] == "cancelled" and after["interactive"] == "shell", after  # given back


@pytest.mark.usefixtures("no_namespace_outlives_its_test")
def test_as_root_a_terminal_is_the_tenants_user_in_its_workloads_cgroup_and_namespaces(
    tmp_path, work_root
):
    """On a root agent with tenant users: the terminal's process is the tenant's user, in
    the allocation's cgroup, its tenant's network namespace and the workload's private
    ``/tmp`` — the same namespaces as the job's own first process."""
    if os.geteuid() != 0:
        if os.environ.get("GPUPOOL_REQUIRE_ROOT"):
            raise RuntimeError("this test needs root (CI runs it as root)")
        pytest.skip("tenant users need root")
    from gpupool.agent.workloads import IsolationConfig
    from gpupool.server.settings import Settings

    settings = Settings(data_dir=tmp_path / "data", log_json=False, cycle_interval_s=0.2)
    config = IsolationConfig(mode="tenant-users", user_prefix="gpt-", work_dir=work_root)
    with live_server(settings, run_scheduler=True) as srv:
        ok(srv.admin().post("/api/v1/tenants", json={"name": "alpha"}), 201)
        agent = make_agent(srv.url, srv.token("agent-n1", "agent", node="n1"), "n1",
                           tmp_path / "agent", isolation=config)  # fmt: skip
        try:
            with agent_thread(agent):
                wait_for_cards(srv.admin())
                job = running_session(srv.admin(), "alpha")
                alloc = job["allocation"]["id"]
                shim = agent.records[alloc].pid  # the workload is its child, once started
                first = wait_for("the workload", lambda: (children(shim) or [None])[0], 20)
                term = shell(srv.url, srv.token("ann", "member", "alpha"), job["id"])
                term.type("echo; echo user=$(id -un) home=$HOME; cat /proc/self/cgroup; "
                          "readlink /proc/self/ns/net /proc/self/ns/mnt; touch /tmp/t; "
                          "echo devs=$CUDA_VISIBLE_DEVICES done\n")  # fmt: skip
                text = term.read_until(r"devs=GPU\S* done")
                # read while the workload runs: once the agent stops, its process is gone
                spaces = {k: os.readlink(f"/proc/{first}/ns/{k}") for k in ("net", "mnt")}
                term.type("exit\n")
                term.wait_exit()
        finally:
            if agent.launcher.networks is not None:
                agent.launcher.networks.remove_all()
    assert "user=gpt-alpha" in text, text
    assert f"alloc-{alloc}" in text, text  # its cgroup
    for kind, space in spaces.items():
        assert space in text, (kind, text)
    assert "devs=GPU-sim-n1-" in text, text
    assert not os.path.exists("/tmp/t")  # its /tmp is the workload's, not the host's
