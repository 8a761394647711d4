"""Tenant isolation on a node, with a real agent (root) and real workloads: tenant beta's job
tries to read tenant alpha's logs, environment and files, the agent's token and the server's
token files — and gets nothing, while the same attack under ``--isolation none`` gets them all
(the control that shows the attack works). Workloads run as their tenant's user, in their own
0700 folder, inside a cgroup of their grant."""

import shutil
import tempfile
import time
from pathlib import Path

import pytest

from gpupool.agent import processes as proc
from gpupool.agent.identity import Isolation, resolve, unix_name
from gpupool.agent.workloads import IsolationConfig
from gpupool.model import SpecError
from gpupool.server.bootstrap import saved_token
from gpupool.server.settings import Settings
from tests.support.agents import (
    agent_process,
    agent_thread,
    in_state,
    kill9,
    make_agent,
    no_namespace_outlives_its_test,  # noqa: F401 - used through pytestmark
    no_workload_outlives_its_test,  # noqa: F401 - autouse: kills what a test left
    skip_module_unless_root,
    wait_for,
)
from tests.support.cluster import ok, submit
from tests.support.live import live_server

pytestmark = pytest.mark.usefixtures("no_namespace_outlives_its_test")

skip_module_unless_root("tenant isolation needs root to create users")

HF_SECRET = "hf_alphasecretvalue"
LOG_SECRET = "alpha-log-marker"
FILE_SECRET = "alpha-file-marker"
# what an attacker greps for: tokens and the other team's markers, in whatever it can read
PATTERN = r"gp_[A-Za-z0-9_-]{20,}|hf_[a-z]+|alpha-log-[a-z]+|alpha-file-[a-z]+"
ATTACK = f"""
id -u > "$HOME/me"
{{
  for f in /proc/[0-9]*/environ; do tr '\\0' '\\n' < "$f"; done
  for f in /proc/[0-9]*/cwd/* "$STATE"/workloads/*/* "$STATE"/lease "$DATA"/* "$WORK"/*/*; do
    [ -f "$f" ] && timeout 2 head -c 1000000 "$f"
  done
  ls "$WORK" "$STATE/workloads"
}} 2>/dev/null | grep -a -o -E '{PATTERN}' | sort -u | sed 's/^/found /'
echo "uid $(id -u) gid $(id -g) groups $(id -G) home $HOME"
echo "own $BETA_OWN"
stat -c 'cwd %a %U' .
echo "path $PATH"
"""
# each controller's cgroup of this process, and the limit files in it (v1 and v2)
SHOW_LIMITS = r"""
while IFS=: read -r n ctrl path; do
  case "$ctrl" in
    memory) d=/sys/fs/cgroup/memory$path; f=memory.limit_in_bytes ;;
    cpu|cpu,cpuacct|cpuacct,cpu) d=/sys/fs/cgroup/$ctrl$path; f=cpu.cfs_quota_us ;;
    pids) d=/sys/fs/cgroup/pids$path; f=pids.max ;;
    "") d=/sys/fs/cgroup$path; f="memory.max cpu.max pids.max" ;;
    *) continue ;;
  esac
  for x in $f; do [ -f "$d/$x" ] && echo "$x $(cat "$d/$x")"; done
done < /proc/self/cgroup
"""
VICTIM = f"echo {LOG_SECRET}; echo {FILE_SECRET} > secret.txt; chmod 644 secret.txt; sleep 120"


@pytest.fixture
def work_root():
    path = Path(tempfile.mkdtemp(prefix="gpupool-test-work-", dir="/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _live(tmp_path):
    settings = Settings(data_dir=tmp_path / "data", log_json=False, cycle_interval_s=0.2)
    return live_server(settings, run_scheduler=True)


def _teams(srv) -> None:
    admin = srv.admin()
    for team in ("alpha", "beta"):
        ok(admin.post("/api/v1/tenants", json={"name": team}), 201)
        quota = {"resource": "gpu", "nominal": 2}
        ok(admin.put(f"/api/v1/tenants/{team}/quotas/gpu", json=quota))


def _log(admin, job_id: int) -> str:
    chunks = admin.get(f"/api/v1/jobs/{job_id}/logs").json()["chunks"]
    return "".join(c["text"] for c in chunks)


def _attack(tmp_path, work_root, mode: str) -> tuple[str, dict[str, str]]:
    """Run alpha's victim and beta's attacker on one node (a real ``gpupool agent`` process
    with its token in its environment); beta's output and the secrets."""
    with _live(tmp_path) as srv:
        _teams(srv)
        admin = srv.admin()
        data = tmp_path / "data"
        admin_token = saved_token(srv.ctx.db, data / "admin-token")
        agent_token = srv.token("agent-n1", "agent", node="n1")
        state = tmp_path / "agent"
        flags = ("--isolation", mode, "--user-prefix", "gpt-", "--work-dir", str(work_root))
        agent = agent_process(srv.url, agent_token, "n1", state, *flags)
        try:
            victim = submit(
                admin, "gpu=1", "alpha", command=["sh", "-c", VICTIM], env={"HF_TOKEN": HF_SECRET}
            )
            wait_for("victim", lambda: LOG_SECRET in _log(admin, victim["id"]))
            env = {"STATE": str(state), "DATA": str(data), "WORK": str(work_root)}
            attacker = submit(
                admin, "gpu=1", "beta", command=["sh", "-c", ATTACK], env=env | {"BETA_OWN": "b1"}
            )
            done = wait_for("attack", in_state(admin, attacker["id"], "succeeded", "failed"), 60)
            assert done["state"] == "succeeded", done["reason"]
            output = wait_for("output", lambda: _log(admin, attacker["id"]))
        finally:
            kill9(agent)
        secrets = {
            "agent token": agent_token,
            "admin token": admin_token,
            "alpha's env": HF_SECRET,
            "alpha's log": LOG_SECRET,
            "alpha's file": FILE_SECRET,
        }
        return output, secrets


def test_a_tenants_job_reads_nothing_of_another_tenant_or_the_agent(tmp_path, work_root):
    output, secrets = _attack(tmp_path, work_root, "tenant-users")
    leaked = [what for what, secret in secrets.items() if secret in output]
    assert not leaked, output
    assert "found " not in output, output
    lines = dict(line.split(" ", 1) for line in output.splitlines() if " " in line)
    beta = Path(f"/home/{unix_name('gpt-', 'beta')}")  # never created: no home
    assert not beta.exists()
    import pwd

    entry = pwd.getpwnam(unix_name("gpt-", "beta"))
    assert lines["uid"].split()[0] == str(entry.pw_uid) != "0"
    assert lines["uid"].split()[4] == str(entry.pw_gid)  # no supplementary groups
    assert lines["own"] == "b1"  # it reads its own environment (the attack did run)
    assert lines["cwd"] == f"700 {entry.pw_name}"
    assert lines["path"] == "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def test_the_same_attack_without_isolation_reads_everything(tmp_path, work_root):
    """The control: as the agent's own user the attack finds every secret, so the test above
    would fail if isolation did not hold."""
    output, secrets = _attack(tmp_path, work_root, "none")
    found = {what for what, secret in secrets.items() if secret in output}
    assert found == set(secrets), output


def test_workloads_get_their_grant_as_cgroup_limits_and_leave_nothing_behind(tmp_path, work_root):
    with _live(tmp_path) as srv:
        _teams(srv)
        admin = srv.admin()
        token = srv.token("agent-n1", "agent", node="n1")
        isolation = IsolationConfig(mode="tenant-users", user_prefix="gpt-", work_dir=work_root)
        agent = make_agent(srv.url, token, "n1", tmp_path / "agent", isolation=isolation)
        if agent.launcher.cgroups.hierarchy.version is None:
            pytest.skip(f"no writable cgroups here: {agent.launcher.cgroups.hierarchy.note}")
        show = SHOW_LIMITS + "setsid sleep 300 & sleep 2"
        with agent_thread(agent):
            job = submit(admin, "gpu=1,cpu=0.5,mem=64MiB", "alpha", command=["sh", "-c", show])
            # its record while it runs (waiting for the job's state, a loaded machine once saw
            # it already ended and forgotten)
            rec = wait_for("its record", lambda: next(iter(agent.records.values()), None))
            paths = list(rec.cgroups)
            escaped = wait_for("escaped sleep", lambda: _sleepers(paths), 10)
            done = wait_for("end", in_state(admin, job["id"], "succeeded", "failed"), 30)
            assert done["state"] == "succeeded", done["reason"]
            wait_for("cleaned", lambda: not agent.records)
            text = _log(admin, job["id"])
            hog = submit(
                admin,
                "gpu=1,mem=64MiB",
                "alpha",
                command=["dd", "if=/dev/zero", "of=/dev/null", "bs=300M", "count=1"],
            )
            oom = wait_for("oom", in_state(admin, hog["id"], "succeeded", "failed"), 30)
        limits = dict(line.split(" ", 1) for line in text.splitlines())
        if agent.launcher.cgroups.hierarchy.version == 1:
            assert limits["memory.limit_in_bytes"] == str(64 * 1024 * 1024)
            assert limits["cpu.cfs_quota_us"] == "50000"
        else:
            assert limits["memory.max"] == str(64 * 1024 * 1024)
            assert limits["cpu.max"] == "50000 100000"
        # its memory's share of the node's process budget (64 MiB of the node's memory)
        assert limits["pids.max"] == str(agent.launcher.shares(64)[0])
        assert 64 <= int(limits["pids.max"]) < 4096
        # the process that left the process group died with the workload's cgroup
        assert not any(proc.start_ticks(p) for p in escaped)
        assert not any(Path(p).exists() for p in paths)
        assert not list(work_root.iterdir())  # the working folder went with the workload
        assert oom["state"] == "failed"
        assert (
            oom["reason"]
            == "host memory: used more than its 64 MiB grant (killed by the OOM killer)"
        )


def _sleepers(paths: list[str]) -> set[int]:
    from gpupool.agent import cgroups

    out = set()
    for pid in cgroups.members(paths):
        try:
            if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"sleep\x00300"):
                out.add(pid)
        except OSError:
            continue
    return out


def test_tenant_users_needs_root_and_says_so():
    assert resolve("auto", 0) is Isolation.TENANT_USERS
    assert resolve("auto", 1000) is Isolation.NONE
    with pytest.raises(SpecError, match=r"must run as root.*--isolation none"):
        resolve("tenant-users", 1000)
    with pytest.raises(SpecError, match="isolation: 'sandbox' is not one of"):
        resolve("sandbox", 0)


def test_tenant_names_become_distinct_user_names():
    assert unix_name("gp-", "algorithm") == "gp-algorithm"
    a, b = unix_name("gp-", "Team.A"), unix_name("gp-", "team-a")
    assert a != b and len(a) <= 32 and a.startswith("gp-team-a-")
    assert len(unix_name("gp-", "x" * 100)) == 32


def test_an_unmapped_tenant_without_user_creation_fails_only_its_job(tmp_path, work_root):
    with _live(tmp_path) as srv:
        _teams(srv)
        admin = srv.admin()
        token = srv.token("agent-n1", "agent", node="n1")
        isolation = IsolationConfig(
            mode="tenant-users",
            user_prefix="gpt-",
            work_dir=work_root,
            create_users=False,
            tenant_users={"alpha": "nobody-such-user"},
        )
        with agent_thread(make_agent(srv.url, token, "n1", tmp_path / "a", isolation=isolation)):
            job = submit(admin, "gpu=1", "alpha", command=["true"])
            done = wait_for("failed", in_state(admin, job["id"], "failed"))
            assert "no Unix user 'nobody-such-user' for tenant alpha" in done["reason"]
            time.sleep(0.5)
            assert admin.get("/api/v1/nodes/n1").json()["state"] == "ready"
