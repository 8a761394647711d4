"""A tenant against the node agent's loop (issue 57, round 4): a live server with its
scheduler, a root agent (tenant users), two tenants' real jobs on one node.

**Attack**: alpha's six short jobs name FIFOs in alpha's own folder as their ``--output``.
The agent wrote outputs at a job's end on its main loop (``cat > FILE`` as the job's user,
60 s each): beta's next job waited ``admitted`` for 359 s, and meanwhile the agent started,
stopped and killed nothing. Now the outputs are written off the loop, a FIFO (or anything
not a regular file) is refused at once, and beta's job starts as fast as it does on an idle
node (within 2 s of that, measured in the same run); alpha's jobs end saying why their
output was not written."""

import os
import shutil
import stat
import tempfile
import time
from pathlib import Path

import pytest

from gpupool.agent.workloads import IsolationConfig
from gpupool.server.settings import Settings
from tests.support.agents import (
    agent_thread,
    in_state,
    make_agent,
    no_namespace_outlives_its_test,  # noqa: F401 - used through pytestmark
    no_workload_outlives_its_test,  # noqa: F401 - autouse: kills what a test left
    skip_module_unless_root,
    wait_for,
    wait_for_cards,
)
from tests.support.cluster import ok, submit
from tests.support.live import live_server
from tests.support.tenants import alpha_and_beta, job_log

pytestmark = pytest.mark.usefixtures("no_namespace_outlives_its_test")
skip_module_unless_root("tenant users need root")

FIFOS = 6
SMALL = "cpu=100m,mem=64MiB"


def _started_in(admin, tenant: str) -> float:
    """How long a job of ``tenant`` takes from its submission to running."""
    at = time.monotonic()
    job = submit(admin, SMALL, tenant, command=["sleep", "30"])
    wait_for(f"{tenant}'s job running", in_state(admin, job["id"], "running"), 120)
    took = time.monotonic() - at
    ok(admin.post(f"/api/v1/jobs/{job['id']}/cancel"))
    return took


def test_outputs_named_at_fifos_do_not_stall_the_agent(tmp_path, work_root):
    settings = Settings(data_dir=tmp_path / "data", log_json=False, cycle_interval_s=0.2)
    isolation = IsolationConfig(mode="tenant-users", user_prefix="gps-", work_dir=work_root,
                                network=False)  # fmt: skip
    # alpha's own folder (its submit directory), outside the workloads' private /var/tmp
    home = Path(tempfile.mkdtemp(prefix="gpupool-test-home-", dir="/var/lib"))
    home.chmod(0o1777)
    try:
        _attack(tmp_path, work_root, settings, isolation, home)
    finally:
        shutil.rmtree(home, ignore_errors=True)


def _attack(tmp_path, work_root, settings, isolation, home: Path) -> None:
    with live_server(settings, run_scheduler=True) as srv:
        admin = alpha_and_beta(srv.admin(), 1)
        token = srv.token("agent-n1", "agent", node="n1")
        agent = make_agent(srv.url, token, "n1", tmp_path / "n1", isolation=isolation,
                           devices="simulated:2xA100-80G")  # fmt: skip
        with agent_thread(agent):
            wait_for_cards(admin, "n1")
            idle = _started_in(admin, "beta")  # the same node, nothing in the way
            made = submit(admin, SMALL, "alpha", chdir=str(home),
                          command=["sh", "-c", f"for i in $(seq {FIFOS}); do "
                                               "mkfifo fifo-$i; done"])  # fmt: skip
            wait_for("the FIFOs", in_state(admin, made["id"], "succeeded", "failed"), 60)
            assert sorted(p.name for p in home.iterdir()) == [f"fifo-{i}" for i in
                                                                range(1, FIFOS + 1)]  # fmt: skip
            jobs = [
                submit(admin, SMALL, "alpha", chdir=str(home), output=f"fifo-{i}",
                       command=["echo", "to a pipe nobody reads"])["id"]
                for i in range(1, FIFOS + 1)
            ]  # fmt: skip
            for job in jobs:  # started: each ends at once, its output due
                wait_for("alpha's job", in_state(admin, job, "running", "succeeded", "failed"))
            time.sleep(0.5)
            busy = _started_in(admin, "beta")
            for job in jobs:
                wait_for("alpha's job ended", in_state(admin, job, "succeeded", "failed"), 60)
            logs = [job_log(admin, job) for job in jobs]
    print(f"beta's job started {idle:.2f} s after submission on an idle node, {busy:.2f} s "
          f"after alpha's {FIFOS} FIFO outputs")  # fmt: skip
    assert busy <= idle + 2.0
    assert all("not a regular file" in log for log in logs), logs
    assert all(stat.S_ISFIFO(os.stat(home / f"fifo-{i}").st_mode) for i in range(1, FIFOS + 1))
