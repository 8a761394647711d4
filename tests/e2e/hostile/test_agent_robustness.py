"""No single order takes down an agent (DESIGN.md invariant 9). The API refuses malformed jobs
(tests/e2e/hostile/test_api_security.py); these reach the agents anyway — written into the
database as an older server or a hand-made row would — and each fails its own allocation with
the reason while every node stays ready and keeps running good work. And no user string reaches the
container runtime as a flag."""

import os
import sys
import time

import pytest

from gpupool.server.db.tables import JobEventRow, JobRow
from gpupool.server.settings import Settings
from tests.support.agents import (
    agent_process,
    agent_thread,
    in_state,
    kill9,
    make_agent,
    no_workload_outlives_its_test,  # noqa: F401 - autouse: kills what a test left
    stand_in_docker,
    wait_for,
)
from tests.support.cluster import ok, submit
from tests.support.live import live_server

PY = sys.executable


@pytest.fixture
def live(tmp_path):
    settings = Settings(
        data_dir=tmp_path, log_json=False, cycle_interval_s=0.2, heartbeat_timeout_s=5.0
    )
    with live_server(settings, run_scheduler=True) as srv:
        admin = srv.admin()
        ok(admin.post("/api/v1/tenants", json={"name": "algo"}), 201)
        ok(admin.put("/api/v1/tenants/algo/quotas/gpu", json={"resource": "gpu", "nominal": 4}))
        yield srv


def _insert(srv, name: str, command: list[str], env=None, image=None) -> int:
    """A job row as the API would write it, without the API's checks."""
    now = time.time()
    with srv.ctx.db.write() as s:
        job = JobRow(
            tenant="algo", name=name, request="gpu=1", kind="batch",
            priority_class="training", priority=0, gang_size=1, max_runtime_s=None,
            on_preempt="suspend", on_lost="requeue", command=command, image=image,
            env=env or {}, idempotency_key=None, submitted_by="root", state="pending",
            reason="queued", submit_time=now, queued_at=now,
        )  # fmt: skip
        s.add(job)
        s.flush()
        s.add(JobEventRow(job_id=job.id, time=now, to_state="pending", actor="root"))
        job_id = job.id
    srv.ctx.loop.wake()
    return job_id


MALFORMED = [
    ("equals", ["true"], {"A=B": "1"}, None, "environment name 'A=B' is invalid"),
    ("empty-name", ["true"], {"": "1"}, None, "environment name '' is invalid"),
    ("nul-command", ["tr\x00ue"], None, None, "command[0]: must not contain a NUL byte"),
    ("nul-env", ["true"], {"X": "a\x00b"}, None, "env.X: must not contain a NUL byte"),
    ("huge", ["x" * 3_000_000], None, None, "more than the 131072 allowed"),
    ("flag-image", ["-v", "/:/host"], None, "--privileged", "image: '--privileged' starts"),
]


def test_malformed_orders_fail_alone_and_every_node_stays_ready(live, tmp_path):
    admin = live.admin()
    token = live.token("agents", "agent", node="*")
    n1 = agent_process(live.url, token, "n1", tmp_path / "agent-n1")
    try:
        with agent_thread(make_agent(live.url, token, "n2", tmp_path / "agent-n2")) as n2:
            wait_for("nodes", lambda: admin.get("/api/v1/nodes").json()["total"] == 2)
            jobs = {
                _insert(live, name, command, env, image): why
                for name, command, env, image, why in MALFORMED
            }
            for job_id, why in jobs.items():
                done = wait_for("failed", in_state(admin, job_id, "failed", "succeeded"), 30)
                assert done["state"] == "failed" and why in done["reason"], done["reason"]
                assert done["reason"].startswith("cannot start: ")
                events = [e["to_state"] for e in admin.get(f"/api/v1/jobs/{job_id}/events").json()]
                assert "lost" not in events  # its node never went away
            nodes = admin.get("/api/v1/nodes").json()["items"]
            assert {n["name"]: n["state"] for n in nodes} == {"n1": "ready", "n2": "ready"}
            assert n1.poll() is None  # the agent process is alive
            good = [
                submit(admin, "gpu=1", "algo", command=[PY, "-c", "print('fine')"])["id"]
                for _ in range(4)
            ]
            for job_id in good:
                done = wait_for("good", in_state(admin, job_id, "succeeded", "failed"), 30)
                assert done["state"] == "succeeded", done["reason"]
            # the server marks a job ended on the agent's report; the agent forgets it just after
            wait_for(
                "n2 forgets the ended workloads",
                lambda: n2.records == {} or all(r.released for r in n2.records.values()),
                10,
            )
    finally:
        kill9(n1)


def test_no_user_string_becomes_a_container_runtime_flag(live, tmp_path):
    bin_dir = tmp_path / "bin"
    config = stand_in_docker(bin_dir, run=False)
    admin = live.admin()
    token = live.token("agent-n1", "agent", node="n1")
    hostile = ["--privileged", "-v", "/:/host", "--entrypoint", "sh"]
    with agent_thread(make_agent(live.url, token, "n1", tmp_path / "a", isolation=config)):
        job = submit(
            admin, "gpu=1", "algo", command=hostile, image="alpine:3", env={"MODE": "--rm"}
        )
        done = wait_for("end", in_state(admin, job["id"], "succeeded", "failed"))
        bad = _insert(live, "flag-image", ["-v", "/:/host"], image="--privileged")
        refused = wait_for("refused", in_state(admin, bad, "failed"))
    assert done["state"] == "succeeded", done["reason"]
    assert "image: '--privileged' starts with '-'" in refused["reason"]
    args = (bin_dir / "args").read_text().splitlines()  # one run only: the refused one never ran
    end = args.index("--")
    assert args[end + 1 :] == ["alpine:3", *hostile]  # after the image: the container's argv
    options = args[:end]
    assert not set(hostile) & set(options)
    assert "--rm" not in options[4:] and "MODE=--rm" not in options
    assert "MODE=--rm" in (bin_dir / "env-file").read_text().splitlines()
    allocations = admin.get("/api/v1/allocations", params={"tenant": "algo"}).json()["items"]
    first = min(a["id"] for a in allocations)
    assert options[:4] == ["run", "--rm", "--name", f"gpupool-alloc-{first}"]
    assert "no-new-privileges" in options


RUNTIME_STEERING = {
    "PATH": "{red}:/usr/bin:/bin",
    "DOCKER_HOST": "unix://{red}/sock",
    "DOCKER_CONFIG": "{red}",
    "LD_PRELOAD": "{red}/evil.so",
    "CONTAINER_HOST": "unix://{red}/sock",
}


@pytest.mark.parametrize("name", sorted(RUNTIME_STEERING))
def test_an_image_job_cannot_steer_the_root_run_runtime_client(live, tmp_path, name):
    """The reproduction: a member plants ``docker`` in a folder and submits an image job whose
    PATH (or DOCKER_HOST, DOCKER_CONFIG, ...) points there, hoping the agent runs the planted
    one as root. The API refuses the name (422 naming the field); a row written past the API
    is failed by the agent; the planted program never runs."""
    red = tmp_path / "redbin"
    red.mkdir()
    marker = tmp_path / "pwned"
    for tool in ("docker", "podman", "docker-credential-x"):
        (red / tool).write_text(f"#!/bin/sh\nid > {marker}\n")
        (red / tool).chmod(0o755)
    value = RUNTIME_STEERING[name].format(red=red)
    admin = live.admin()
    r = admin.post(
        "/api/v1/jobs",
        json={"request": "gpu=1", "tenant": "algo", "command": ["true"], "image": "alpine",
              "env": {name: value}},
    )  # fmt: skip
    assert r.status_code == 422, r.text
    assert r.json()["field"] == f"env.{name}" and "image job may not set" in r.json()["detail"]
    token = live.token("agent-n1", "agent", node="n1")
    config = stand_in_docker(tmp_path / "bin", run=False)
    with agent_thread(make_agent(live.url, token, "n1", tmp_path / "a", isolation=config)):
        bad = _insert(live, "planted", ["true"], env={name: value}, image="alpine")
        refused = wait_for("refused", in_state(admin, bad, "failed"))
    assert f"env.{name}: an image job may not set" in refused["reason"]
    assert not marker.exists()


MPS_STAND_IN = """#!/bin/sh
# nvidia-cuda-mps-control as NVIDIA documents it: -d starts the daemon (it creates its control
# pipe in CUDA_MPS_PIPE_DIRECTORY); commands such as quit arrive on stdin
calls="$(dirname "$0")/mps-calls"
if [ "$1" = "-d" ]; then
  echo "start $CUDA_VISIBLE_DEVICES $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY" >> "$calls"
  mkfifo "$CUDA_MPS_PIPE_DIRECTORY/control"
  exit 0
fi
read -r command
echo "$command $CUDA_VISIBLE_DEVICES" >> "$calls"
[ "$command" = quit ] && rm -f "$CUDA_MPS_PIPE_DIRECTORY/control"
exit 0
"""


def test_shares_get_one_mps_daemon_per_gpu_started_and_stopped_with_them(
    live, tmp_path, monkeypatch
):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-cuda-mps-control").write_text(MPS_STAND_IN)
    (bin_dir / "nvidia-cuda-mps-control").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    calls = bin_dir / "mps-calls"
    admin = live.admin()
    token = live.token("agent-n1", "agent", node="n1")
    agent = make_agent(live.url, token, "n1", tmp_path / "a", share=True)
    show = (
        "import os, time; e = os.environ; "
        "print(e['CUDA_VISIBLE_DEVICES'], e['CUDA_MPS_PIPE_DIRECTORY'], flush=True); "
        "time.sleep(300)"
    )

    def lines() -> list[str]:
        return calls.read_text().splitlines() if calls.exists() else []

    with agent_thread(agent):
        jobs = [
            submit(admin, "gpu_share=60%,gpu_mem=10GiB", "algo", command=[PY, "-c", show])["id"]
            for _ in range(2)
        ]
        for job in jobs:
            wait_for("running", in_state(admin, job, "running"))
        starts = wait_for("two daemons", lambda: [x for x in lines() if x.startswith("start")])
        assert len(starts) == 2
        daemons = {x.split()[1]: x.split()[2:] for x in starts}  # GPU -> pipe, log
        assert set(daemons) == {"GPU-sim-n1-0", "GPU-sim-n1-1"}
        assert all(pipe != log and pipe.endswith("/pipe") for pipe, log in daemons.values())

        def seen(job: int) -> list[str]:
            chunks = admin.get(f"/api/v1/jobs/{job}/logs").json()["chunks"]
            return "".join(c["text"] for c in chunks).split()

        for job in jobs:  # each client reaches the daemon of its own GPU
            gpu, pipe = wait_for("env", lambda job=job: seen(job))
            assert daemons[gpu][0] == pipe
        first_gpu = seen(jobs[0])[0]
        ok(admin.post(f"/api/v1/jobs/{jobs[0]}/cancel"))
        wait_for("quit", lambda: f"quit {first_gpu}" in lines())
        assert len([x for x in lines() if x.startswith("quit")]) == 1  # the other GPU's stays
        ok(admin.post(f"/api/v1/jobs/{jobs[1]}/cancel"))
        wait_for("both quit", lambda: len([x for x in lines() if x.startswith("quit")]) == 2)


def test_a_heartbeat_an_older_server_refuses_goes_again_without_the_newer_fields():
    """A rolling upgrade that starts with the agents: a server that does not know ``mig`` or
    ``mode`` answers 422; the agent sends the heartbeat again without them (and from then on),
    so the node never looks lost. A real HTTP server on loopback plays the older one."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from gpupool.agent.api import AgentApi

    seen: list[dict] = []

    class OlderServer(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append(body)
            newer = any(k in d for d in body["devices"] for k in ("mig", "mode", "mode_error"))
            status, answer = (422, {"detail": "devices.0.mig: extra inputs"}) if newer else (
                200, {"name": "n1", "state": "ready"})  # fmt: skip
            raw = json.dumps(answer).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), OlderServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    api = AgentApi(f"http://127.0.0.1:{server.server_port}", "t", "n1", timeout_s=5)
    try:
        cut = {"index": 0, "util_pct": 5.0, "mig": ["3g.40gb@4"], "mode": "mig"}
        assert api.heartbeat([cut])["state"] == "ready"
        assert api.heartbeat([cut])["state"] == "ready"
        assert [("mig" in b["devices"][0]) for b in seen] == [True, False, False]
        assert seen[-1]["devices"][0] == {"index": 0, "util_pct": 5.0}
    finally:
        api.close()
        server.shutdown()
        server.server_close()
