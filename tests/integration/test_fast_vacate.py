"""The seconds-fast vacate (issue 49), on a real server, scheduler loop and agent running real
processes: training jobs that save on a signal are told with it and killed after their short
checkpoint grace — not SIGTERM and the agent's 20-s grace —, the victims are the ones that
lose least work (not the youngest), and the work each preemption cost is metered."""

import sys
import time

from gpupool.server.settings import Settings
from tests.support.agents import (
    agent_thread,
    in_state,
    make_agent,
    no_workload_outlives_its_test,  # noqa: F401
    wait_for,
    wait_for_cards,
)
from tests.support.cluster import ok
from tests.support.live import live_server

SAVES = (
    "import signal, sys, time\n"
    "def save(*_):\n"
    "    print('saving on USR1', flush=True); time.sleep(0.3); sys.exit(0)\n"
    "signal.signal(signal.SIGUSR1, save)\n"
    "print('training', flush=True)\n"
    "while True: time.sleep(0.1)\n"
)
DEAF = (  # declares it saves, then ignores the signal: killed when its grace ends
    "import signal, time\n"
    "signal.signal(signal.SIGUSR1, signal.SIG_IGN)\n"
    "print('training', flush=True)\n"
    "while True: time.sleep(0.1)\n"
)


def _job(client, name: str, code: str | None, checkpoint: dict | None) -> int:
    body: dict = {"request": "gpu=1", "name": name, "tenant": "beta"}
    body["command"] = [sys.executable, "-c", code or "import time; time.sleep(600)"]
    if checkpoint:
        body["checkpoint"] = checkpoint
    return int(ok(client.post("/api/v1/jobs", json=body), 201)["id"])


def _cohort(admin, algo_cards: int) -> None:
    """Tenants algo (``algo_cards`` guaranteed) and beta (none) under one root: beta borrows
    algo's idle cards, and algo takes them back."""
    ok(admin.post("/api/v1/tenants", json={"name": "org"}), 201)
    for tenant, cards in (("algo", algo_cards), ("beta", 0)):
        ok(admin.post("/api/v1/tenants", json={"name": tenant, "parent": "org"}), 201)
        quota = {"resource": "gpu", "nominal": cards}
        ok(admin.put(f"/api/v1/tenants/{tenant}/quotas/gpu", json=quota))


def _log(admin, job_id: int) -> str:
    chunks = ok(admin.get(f"/api/v1/jobs/{job_id}/logs"))["chunks"]
    return "".join(c["text"] for c in chunks)


def test_savers_are_vacated_in_their_grace_and_the_least_work_lost_goes_first(tmp_path):
    config = Settings(data_dir=tmp_path, log_json=False, cycle_interval_s=0.2)
    with live_server(config, run_scheduler=True) as srv:
        admin = srv.admin()
        _cohort(admin, algo_cards=4)
        token = srv.token("agent-n1", "agent", node="n1")
        agent = make_agent(
            srv.url, token, "n1", tmp_path / "agent", devices="simulated:4xA100-80G", grace_s=20
        )
        with agent_thread(agent):
            wait_for_cards(admin)
            usr1 = {"signal": "SIGUSR1", "grace_s": 2}
            saver = _job(admin, "saver", SAVES, usr1)
            deaf = _job(admin, "deaf", DEAF, usr1)
            for j in (saver, deaf):
                try:
                    wait_for(f"job {j} runs", in_state(admin, j, "running"), 10)
                except AssertionError:
                    raise AssertionError(admin.get(f"/api/v1/jobs/{j}").json()) from None
            wait_for("both train", lambda: all("training" in _log(admin, j) for j in (saver, deaf)))
            # the youngest, and it saves nothing: stopping it would lose all it ran
            plain = _job(admin, "plain", None, None)
            wait_for("plain runs", in_state(admin, plain, "running"), 30)
            time.sleep(3.5)  # it has run longer than the savers' 2-s grace
            asked = time.monotonic()
            body = {"request": "gpu=3", "tenant": "algo", "command": ["sleep", "600"]}
            own = int(ok(admin.post("/api/v1/jobs", json=body), 201)["id"])
            wait_for("algo's job runs", in_state(admin, own, "running"), 30)
            took = time.monotonic() - asked
            print(f"submission to running, through the vacate: {took:.2f} s")
            # the deaf saver was killed when its 2-s grace ended, not the agent's 20 s
            assert took < 12, f"{took:.1f} s from submission to running"
            for j in (saver, deaf):
                job = ok(admin.get(f"/api/v1/jobs/{j}"))
                assert job["state"] in ("pending", "admitted"), job
                events = ok(admin.get(f"/api/v1/jobs/{j}/events"))
                assert any("reclaimed by algo" in e["reason"] for e in events), events
                assert 0 < job["lost_gpu_s"] <= 2.0 + 1e-6, job  # one card, its grace
                assert job["checkpoint"]["signal"] == "USR1"
            assert "saving on USR1" in _log(admin, saver)
            still = ok(admin.get(f"/api/v1/jobs/{plain}"))
            assert still["state"] == "running" and still["lost_gpu_s"] == 0
            metrics = admin.get("/metrics").text
            assert 'gpupool_preemption_lost_gpu_seconds_total{tenant="beta"} 4.0' in metrics


def test_a_checkpoint_the_server_cannot_honour_is_refused_naming_it(tmp_path):
    config = Settings(data_dir=tmp_path, log_json=False, checkpoint_grace_max_s=10)
    with live_server(config) as srv:
        admin = srv.admin()
        ok(admin.post("/api/v1/tenants", json={"name": "algo"}), 201)
        base = {"request": "cpu=1", "tenant": "algo", "command": ["true"]}
        cases = [
            ({"signal": "KILL"}, "checkpoint.signal"),
            ({"signal": "USR1", "grace_s": 60}, "checkpoint_grace_max_s (10 s)"),
            ({"signal": "USR1", "before_limit_s": 90}, "needs a max_runtime_s longer"),
        ]
        for checkpoint, words in cases:
            r = admin.post("/api/v1/jobs", json={**base, "checkpoint": checkpoint})
            assert r.status_code == 422 and words in r.text, r.text
        job = ok(admin.post("/api/v1/jobs", json={**base, "checkpoint": {"signal": "10"}}), 201)
        assert job["checkpoint"] == {
            "signal": "USR1",
            "grace_s": 5,
            "shell_only": False,
            "before_limit_s": None,
        }


BATCH_SHELL = (  # a batch script's trap, as Slurm's --signal=B:USR1@T scripts have them
    'python3 -c "import signal, time; signal.signal(signal.SIGUSR1, lambda *_: '
    "print('child signalled', flush=True)); time.sleep(60)\" & child=$!\n"
    'on_usr1() { sleep 0.3; echo "shell got USR1"; kill $child; exit 0; }\n'
    "trap on_usr1 USR1\n"
    "wait $child\n"
)


def test_the_signal_comes_before_the_time_limit_to_the_batch_shell_alone(tmp_path):
    config = Settings(data_dir=tmp_path, log_json=False, cycle_interval_s=0.2)
    with live_server(config, run_scheduler=True) as srv:
        admin = srv.admin()
        ok(admin.post("/api/v1/tenants", json={"name": "algo"}), 201)
        token = srv.token("agent-n1", "agent", node="n1")
        agent = make_agent(srv.url, token, "n1", tmp_path / "agent", grace_s=20)
        with agent_thread(agent):
            wait_for_cards(admin)
            body = {
                "request": "cpu=1",
                "tenant": "algo",
                "max_runtime_s": 8,
                "command": ["bash", "-c", BATCH_SHELL],
                "checkpoint": {"signal": "USR1", "shell_only": True, "before_limit_s": 6},
            }
            job = int(ok(admin.post("/api/v1/jobs", json=body), 201)["id"])
            ended = wait_for(
                "the job ends",
                lambda: (j := ok(admin.get(f"/api/v1/jobs/{job}")))["finished_at"] and j,
                30,
            )
            # 2 s in: the shell's trap ran while its child lived, and the job ended well
            log = _log(admin, job)
            assert "shell got USR1" in log and "child signalled" not in log, log
            assert ended["state"] == "succeeded" and ended["finished_at"] - ended["started_at"] < 6


STAMPS = (  # saves nothing on a signal, but says when it saved: touches its checkpoint file
    "import os, pathlib, time\n"
    "stamp = pathlib.Path(os.environ['GPUPOOL_CHECKPOINT_FILE'])\n"
    "print('training', flush=True)\n"
    "while True:\n"
    "    stamp.touch(); time.sleep(0.3)\n"
)


def test_the_job_that_saved_last_goes_first_and_loses_only_what_followed(tmp_path):
    config = Settings(data_dir=tmp_path, log_json=False, cycle_interval_s=0.2)
    with live_server(config, run_scheduler=True) as srv:
        admin = srv.admin()
        _cohort(admin, algo_cards=2)
        token = srv.token("agent-n1", "agent", node="n1")
        agent = make_agent(srv.url, token, "n1", tmp_path / "agent", devices="simulated:2xA100-80G")
        with agent_thread(agent):
            wait_for_cards(admin)
            saving = _job(admin, "stamps", STAMPS, None)
            wait_for("it runs", in_state(admin, saving, "running"), 30)
            time.sleep(2.0)  # the older one, by 2 s
            plain = _job(admin, "plain", None, None)
            wait_for("plain runs", in_state(admin, plain, "running"), 30)
            time.sleep(1.0)
            body = {"request": "gpu=1", "tenant": "algo", "command": ["sleep", "600"]}
            own = int(ok(admin.post("/api/v1/jobs", json=body), 201)["id"])
            wait_for("algo's job runs", in_state(admin, own, "running"), 30)
            taken = ok(admin.get(f"/api/v1/jobs/{saving}"))
            assert taken["state"] != "running"  # older, but it had just saved
            assert 0 < taken["lost_gpu_s"] < 1.5, taken  # what followed its last stamp
            assert ok(admin.get(f"/api/v1/jobs/{plain}"))["state"] == "running"
            alloc = ok(admin.get(f"/api/v1/jobs/{plain}"))["allocation"]
            stale = {"generation": alloc["generation"] + 1, "at": time.time()}
            r = srv.client(token).post(
                f"/api/v1/allocations/{alloc['id']}/checkpointed", json=stale
            )
            assert r.status_code == 409 and "stale" in r.text
