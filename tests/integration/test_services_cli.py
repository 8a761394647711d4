"""``gpupool service ...`` as a user types it, against a live server (its reconciler run by
hand): create, list, show, scale, endpoints, forecast, delete, and bad input in one line."""

import json

from tests.support.cli import gpupool
from tests.support.cluster import seed_cluster


def test_the_service_commands(sqlite_server):
    seed_cluster(sqlite_server.admin(), nodes=1, cards=4, tenants={"algo": 4})
    env = {"GPUPOOL_SERVER": sqlite_server.url, "GPUPOOL_TOKEN": sqlite_server.admin_token,
           "COLUMNS": "80"}  # fmt: skip

    def run(*args: str):
        done = gpupool("service", *args, env=env)
        assert "Traceback" not in done.stderr
        return done

    made = run("create", "chat", "--tenant", "algo", "--request", "gpu=1", "--target", "8",
               "--max", "3", "--env", "MODEL=qwen", "--", "python3", "serve.py")  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert "chat" in made.stdout and "rps 8" in made.stdout
    assert sqlite_server.ctx.loop.leadership.try_acquire()
    sqlite_server.ctx.loop.services.step(force=True)
    listed = run("list")
    assert listed.returncode == 0 and "algo" in listed.stdout
    assert max(len(line) for line in listed.stdout.splitlines()) <= 80
    shown = run("show", "chat", "--tenant", "algo")
    assert shown.returncode == 0 and "status: reactive; no load reading yet" in shown.stdout
    assert "pending" in shown.stdout  # its one replica, waiting for a cycle
    data = json.loads(run("show", "chat", "--tenant", "algo", "--json").stdout)
    assert data["command"] == ["python3", "serve.py"] and data["max_replicas"] == 3
    pinned = run("scale", "chat", "2", "--tenant", "algo", "--json")
    assert json.loads(pinned.stdout)[0]["pinned"] == 2
    assert (
        json.loads(run("scale", "chat", "auto", "--tenant", "algo", "--json").stdout)[0]["pinned"]
        is None
    )
    said = run("scale", "chat", "3", "--tenant", "algo").stdout.strip()
    assert said == (  # the new number, not the desired of the last pass (it echoed 1)
        "service chat: pinned at 3 replicas (was 1); 0 ready now, the rest start or drain "
        "within seconds"
    )
    back = run("scale", "chat", "auto", "--tenant", "algo").stdout.strip()
    assert back == "service chat: replicas back to the autoscaler (1..3); 0 ready now"
    bad = run("scale", "chat", "many", "--tenant", "algo")
    assert bad.returncode == 2 and "neither a number nor auto" in bad.stderr
    assert run("endpoints", "chat", "--tenant", "algo").stdout.strip() == "no ready replicas"
    forecast = run("forecast", "chat", "--tenant", "algo")
    assert forecast.returncode == 0 and "no load samples yet" in forecast.stdout
    wrong = run("create", "x", "--tenant", "algo", "--request", "gpu=1", "--target", "1",
                "--min", "5", "--max", "2", "--", "serve")  # fmt: skip
    assert wrong.returncode == 2 and "min_replicas: 5 is above max_replicas 2" in wrong.stderr
    gone = run("delete", "chat", "--tenant", "algo")
    assert gone.returncode == 0 and "deleted service chat" in gone.stdout
    missing = run("show", "chat", "--tenant", "algo")
    assert missing.returncode == 2 and "service chat not found" in missing.stderr


def test_cancel_by_filters_leaves_service_replicas_to_their_service(sqlite_server):
    """Issue 59, finding 10: ``job cancel --me --state pending`` (or running) cancelled the
    admin's service replicas with the admin's own jobs; replicas are the autoscaler's, so the
    filters leave them alone and say which were left and why."""
    admin = sqlite_server.admin()
    seed_cluster(admin, nodes=1, cards=4, tenants={"algo": 4})
    env = {"GPUPOOL_SERVER": sqlite_server.url, "GPUPOOL_TOKEN": sqlite_server.admin_token}
    made = gpupool("service", "create", "chat", "--tenant", "algo", "--request", "gpu=1",
                   "--target", "8", "--min", "2", "--", "python3", "serve.py", env=env)  # fmt: skip
    assert made.returncode == 0, made.stderr
    assert sqlite_server.ctx.loop.leadership.try_acquire()
    sqlite_server.ctx.loop.services.step(force=True)
    mine = gpupool("job", "submit", "--tenant", "algo", "--cpu", "1", "--json", "--", "true",
                   env=env)  # fmt: skip
    assert mine.returncode == 0, mine.stderr
    mine_id = json.loads(mine.stdout)["id"]
    jobs = admin.get("/api/v1/jobs", params={"state": "pending"}).json()["items"]
    replicas = sorted(j["id"] for j in jobs if j["name"] == "chat-replica")
    assert len(replicas) == 2
    done = gpupool("job", "cancel", "--me", "--state", "pending", env=env)
    assert done.returncode == 0, done.stderr
    assert f"job {mine_id} cancelled" in done.stdout
    assert f"left 2 service replica(s) alone: {replicas[0]}, {replicas[1]} of service chat" in (
        done.stdout
    ), done.stdout
    assert "gpupool service scale chat" in done.stdout and "gpupool service delete chat" in (
        done.stdout
    )
    for job_id in replicas:
        assert admin.get(f"/api/v1/jobs/{job_id}").json()["state"] == "pending"
    listed = admin.get("/api/v1/jobs", params={"state": "pending"}).json()["items"]
    assert sorted(j["id"] for j in listed if j["service"] == "chat") == replicas
    assert admin.get(f"/api/v1/jobs/{mine_id}").json()["service"] is None
