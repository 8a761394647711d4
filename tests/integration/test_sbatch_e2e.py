"""``gpupool sbatch`` end to end on a live server with two agents: a multi-node batch script
that reads ``SLURM_*`` and calls ``scontrol show hostnames`` and ``srun`` runs as 2 nodes ×
2 ranked tasks (it ran as one 1-CPU process with no GPU, its #SBATCH lines ignored); its
array variant sees its task ids; ``job submit`` of a script with #SBATCH lines says to use
sbatch rather than skipping them."""

import re
import time

from gpupool.server.settings import Settings
from tests.support.agents import (  # noqa: F401 (the fixture kills leftover workloads)
    agent_thread,
    in_state,
    make_agent,
    no_workload_outlives_its_test,
    wait_for,
    wait_for_cards,
)
from tests.support.cli import gpupool
from tests.support.cluster import ok
from tests.support.live import live_server
from tests.support.tenants import job_log

RANKS = """#!/bin/bash
#SBATCH -N 2
#SBATCH --ntasks-per-node=2
#SBATCH --gres=gpu:1
#SBATCH -J ranks
#SBATCH -t 5
#SBATCH --mail-type=END
MASTER=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)
srun -l sh -c 'echo "rank $SLURM_PROCID of $SLURM_NTASKS local $SLURM_LOCALID on \
$SLURMD_NODENAME node $SLURM_NODEID gpus $CUDA_VISIBLE_DEVICES master '"$MASTER"'"'
"""
ARRAY = """#!/bin/sh
#SBATCH --array=0-2
#SBATCH --gpus-per-node=1
echo "task $SLURM_ARRAY_TASK_ID of $SLURM_ARRAY_TASK_COUNT in array $SLURM_ARRAY_JOB_ID"
"""


def _cluster(tmp_path):
    settings = Settings(data_dir=tmp_path / "data", log_json=False, cycle_interval_s=0.2)
    return live_server(settings, run_scheduler=True)


def test_a_multi_node_batch_script_runs_its_ranked_tasks_and_an_array_its_tasks(tmp_path):
    with _cluster(tmp_path) as srv:
        admin = srv.admin()
        ok(admin.post("/api/v1/tenants", json={"name": "algo"}), 201)
        ok(admin.put("/api/v1/tenants/algo/quotas/gpu", json={"resource": "gpu", "nominal": 4}))
        env = {"GPUPOOL_SERVER": srv.url, "GPUPOOL_TOKEN": srv.admin_token}
        (tmp_path / "ranks.sh").write_text(RANKS)
        (tmp_path / "array.sh").write_text(ARRAY)
        tokens = {n: srv.token(f"a-{n}", "agent", node=n) for n in ("n1", "n2")}
        agents = [agent_thread(make_agent(srv.url, t, n, tmp_path / n)) for n, t in tokens.items()]
        with agents[0], agents[1]:
            wait_for_cards(admin, "n1")
            wait_for_cards(admin, "n2")
            sent = gpupool("sbatch", "-A", "algo", "ranks.sh", env=env, cwd=tmp_path)
            assert sent.returncode == 0, sent.stderr
            job_id = int(re.fullmatch(r"Submitted batch job (\d+)\n", sent.stdout)[1])
            done = wait_for("ranks", in_state(admin, job_id, "succeeded", "failed"), 60)
            ranks = job_log(admin, job_id)
            job = ok(admin.get(f"/api/v1/jobs/{job_id}"))
            array = gpupool("sbatch", "--parsable", "-A", "algo", "array.sh", env=env,
                            cwd=tmp_path)  # fmt: skip
            first = int(array.stdout)
            tasks = ok(admin.get("/api/v1/jobs", params={"array": first}))["items"]
            for task in tasks:
                wait_for("task", in_state(admin, task["id"], "succeeded", "failed"), 60)
            time.sleep(0.5)
            outputs = sorted(job_log(admin, t["id"]).strip() for t in tasks)
            refused = gpupool("job", "submit", "ranks.sh", env=env, cwd=tmp_path)
    assert done["state"] == "succeeded", done["reason"]
    assert "--mail-type has no effect here" in sent.stderr
    assert (job["request"], job["gang_size"], job["name"]) == ("gpu=1,cpu=2000m", 2, "ranks")
    lines = sorted(re.findall(r"rank (\d) of 4 local (\d) on (n\d) node (\d) gpus \S+ master n1",
                              ranks))  # fmt: skip
    # -N 2: two nodes (not both workers on one), two ranked tasks on each
    assert lines == [("0", "0", "n1", "0"), ("1", "1", "n1", "0"),
                     ("2", "0", "n2", "1"), ("3", "1", "n2", "1")], ranks  # fmt: skip
    assert outputs == [f"task {i} of 3 in array {first}" for i in range(3)]
    assert refused.returncode == 2 and "submit it with gpupool sbatch ranks.sh" in refused.stderr
    assert (tmp_path / f"slurm-{job_id}.out").exists()  # sbatch's default output file


EXCLUSIVE = """#!/bin/bash
#SBATCH -N 2
#SBATCH --ntasks-per-node=2
#SBATCH --gres=gpu:1
#SBATCH --exclusive
#SBATCH -J whole
#SBATCH -t 5
srun -l sh -c 'echo "rank $SLURM_PROCID on $SLURMD_NODENAME gpus $CUDA_VISIBLE_DEVICES \
on-node $SLURM_GPUS_ON_NODE cpus $SLURM_CPUS_ON_NODE"; sleep 12'
"""


def test_an_exclusive_two_node_script_holds_whole_nodes_and_nothing_else_lands_there(tmp_path):
    """Issue 63: sbatch --exclusive with Slurm's meaning, end to end — a 2-node script with
    srun gets every card and CPU of two nodes, says so at submission, and while it runs the
    other work (cards, CPU, memory alone) goes to the third node or waits, named."""
    with _cluster(tmp_path) as srv:
        admin = srv.admin()
        ok(admin.post("/api/v1/tenants", json={"name": "algo"}), 201)
        ok(admin.put("/api/v1/tenants/algo/quotas/gpu", json={"resource": "gpu", "nominal": 6}))
        env = {"GPUPOOL_SERVER": srv.url, "GPUPOOL_TOKEN": srv.admin_token}
        (tmp_path / "whole.sh").write_text(EXCLUSIVE)
        names = ("n1", "n2", "n3")
        tokens = {n: srv.token(f"a-{n}", "agent", node=n) for n in names}
        agents = [agent_thread(make_agent(srv.url, t, n, tmp_path / n)) for n, t in tokens.items()]
        with agents[0], agents[1], agents[2]:
            for n in names:
                wait_for_cards(admin, n)
            sent = gpupool("sbatch", "-A", "algo", "whole.sh", env=env, cwd=tmp_path)
            assert sent.returncode == 0, sent.stderr
            job_id = int(re.fullmatch(r"Submitted batch job (\d+)\n", sent.stdout)[1])
            running = wait_for("whole", in_state(admin, job_id, "running"), 60)
            held = {n["node"] for n in running["allocation"]["nodes"]}
            others = [
                ok(admin.post("/api/v1/jobs", json={"request": spec, "tenant": "algo",
                                                    "command": ["sleep", "1"]}), 201)
                for spec in ("gpu=1,cpu=1", "gpu=1,cpu=1", "gpu=1,cpu=1", "mem=64MiB")
            ]  # fmt: skip
            seen: list[tuple[str, str, str]] = []  # (job, state, node) while it ran
            while ok(admin.get(f"/api/v1/jobs/{job_id}"))["state"] == "running":
                for o in others:
                    j = ok(admin.get(f"/api/v1/jobs/{o['id']}"))
                    where = [n["node"] for n in (j["allocation"] or {}).get("nodes", [])]
                    seen += [(str(o["id"]), j["state"], n) for n in where]
                    if j["state"] == "pending":
                        seen.append((str(o["id"]), "pending", j["reason"]))
                time.sleep(0.3)
            done = wait_for("whole", in_state(admin, job_id, "succeeded", "failed"), 60)
            log = job_log(admin, job_id)
            after = [wait_for("after", in_state(admin, o["id"], "succeeded"), 60) for o in others]
    assert done["state"] == "succeeded", done["reason"]
    assert f"--exclusive: job {job_id} gets 2 whole nodes" in sent.stderr, sent.stderr
    assert "quota and bill count all of them" in sent.stderr
    assert running["request"] == "gpu=1,cpu=2000m,node=whole" and len(held) == 2
    for grant in running["allocation"]["nodes"]:  # every card of the node, not the 1 asked
        assert grant["whole"] and len(grant["devices"]) == 2, grant
    lines = re.findall(r"rank (\d) on (n\d) gpus (\S+) on-node (\d) cpus (\d+)", log)
    assert len(lines) == 4 and {n for _, n, _, _, _ in lines} == held, log
    assert all(len(g.split(",")) == 2 and on == "2" for _, _, g, on, _ in lines), log
    placed = [(j, n) for j, state, n in seen if state != "pending"]
    assert placed and all(n not in held for _, n in placed), seen  # only the third node
    waited = [why for _, state, why in seen if state == "pending"]
    assert any("held whole by an exclusive job" in why for why in waited), waited
    assert all(j["state"] == "succeeded" for j in after)
