"""Slurm's query and cancel habits through the real ``gpupool`` CLI against a live server
(issue 63): ``queue -o``/``-O``/``-t``/``-j``/``-h`` as squeue, ``nodes -o``/``-N`` as
sinfo, ``acct -j --format`` with sacct's fields and ``-P -n``, ``job show --slurm`` as
``scontrol show job``, and ``job cancel`` with scancel's ``-u -t -n`` and ``ID_[1-2]``; what
gpupool cannot print is refused naming it. The format strings are the ones public scripts use
(tests/unit/test_slurm_formats.py cites them)."""

from tests.support.cli import gpupool
from tests.support.cluster import ok, seed_cluster


def _env(srv) -> dict[str, str]:
    return {"GPUPOOL_SERVER": srv.url, "GPUPOOL_TOKEN": srv.admin_token, "TZ": "UTC"}


def _submit(admin, **extra) -> dict:
    body = {"request": "gpu=1", "tenant": "algo", "command": ["true"], **extra}
    return ok(admin.post("/api/v1/jobs", json=body), 201)


def test_queue_acct_show_and_cancel_speak_slurm(sqlite_server):
    srv = sqlite_server
    admin = srv.admin()
    seed_cluster(admin, nodes=1, tenants={"algo": 4})
    env = _env(srv)
    array = _submit(admin, name="sweep", array="0-3", hold=True)["id"]
    train = _submit(admin, name="train", hold=True)["id"]
    gone = _submit(admin, name="old", hold=True)["id"]
    ok(admin.post(f"/api/v1/jobs/{gone}/cancel"))

    # squeue -u $USER -o "%.18i %.9P %.30j %.8T %.10M %R" (the issue's), without a header
    r = gpupool("queue", "-u", "root", "-h", "-o", "%.18i %.9P %.30j %.8T %.10M %R", env=env)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 5 and all(line.split()[3] == "PENDING" for line in lines), lines
    assert lines[0].split() == [f"{array}_0", "gpupool", "sweep", "PENDING", "0:00",
                                "(JobHeldUser)"]  # fmt: skip
    assert f"{train}   gpupool" in lines[4] and len(lines[0]) == 18 + 10 + 31 + 9 + 11 + 14
    # squeue -j ID -h -o %T, the state a polling script waits on; -O with squeue's names
    r = gpupool("queue", "-j", str(train), "-h", "-o", "%T", env=env)
    assert r.stdout == "PENDING\n", r
    r = gpupool("queue", "-t", "PD", "-j", f"{array}_[1-2]", "-O", "JobArrayID:.12,Name", env=env)
    assert r.stdout.splitlines()[1:] == [f"{array}_1".rjust(12) + "sweep".ljust(20),
                                         f"{array}_2".rjust(12) + "sweep".ljust(20)]  # fmt: skip
    # sacct -j ID --format=JobID,State,Elapsed,MaxRSS, and parsable without a header
    r = gpupool("acct", "-j", str(gone), "--format=JobID,State,Elapsed,MaxRSS", env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == [
        "       JobID      State    Elapsed     MaxRSS ",
        "------------ ---------- ---------- ---------- ",
        f"{gone:<12} {'CANCELLED':>10}   00:00:00            ",
    ]
    r = gpupool("acct", "-j", f"{gone},{train}", "-P", "-n", "-o", "jobid,state,exitcode",
                env=env)  # fmt: skip
    assert r.stdout.splitlines() == [f"{train}|PENDING|0:0", f"{gone}|CANCELLED|0:0"]  # by id
    # scontrol show job ID | grep -oP 'JobState=\K\w+'
    r = gpupool("job", "show", str(train), "--slurm", env=env)
    assert r.stdout.startswith(f"JobId={train} JobName=train\n   UserId=root Account=algo")
    assert "   JobState=PENDING Reason=JobHeldUser Dependency=(null)\n" in r.stdout
    # scancel ID_[1-2]; scancel -u root -t PENDING -n train
    r = gpupool("job", "cancel", f"{array}_[1-2]", env=env)
    assert r.returncode == 0, r.stderr
    states = {j["array_index"]: j["state"]
              for j in ok(admin.get("/api/v1/jobs", params={"array": array}))["items"]}  # fmt: skip
    assert states == {0: "pending", 1: "cancelled", 2: "cancelled", 3: "pending"}
    r = gpupool("job", "cancel", "-u", "root", "-t", "PENDING", "-n", "train", env=env)
    assert r.stdout.strip() == f"job {train} cancelled", r
    assert ok(admin.get(f"/api/v1/jobs/{array}"))["state"] == "pending"
    # sinfo -o "%P %a %l %D %t %N" (one idle node here), node by node with -N
    r = gpupool("nodes", "-o", "%P %a %l %D %t %N", env=env)
    assert r.stdout.splitlines() == ["PARTITION AVAIL TIMELIMIT NODES STATE NODELIST",
                                     "gpupool* up infinite 1 idle n0"], r  # fmt: skip
    r = gpupool("nodes", "-N", "-h", "-o", "%N %G %C", env=env)
    assert r.stdout.splitlines() == ["n0 gpu:A100-80G:4 0/64/0/64"], r


def test_what_gpupool_cannot_print_or_read_is_refused_naming_it(sqlite_server):
    srv = sqlite_server
    seed_cluster(srv.admin(), nodes=1, tenants={"algo": 4})
    env = _env(srv)
    cases = [
        (("queue", "-o", "%.18i %z"), "--format: %z is not a field gpupool prints"),
        (("queue", "-O", "JobID,tres-alloc"), "'tres-alloc' is not a field gpupool prints"),
        (("queue", "-h"), "--noheader: applies to squeue's formats"),
        (("queue", "-t", "CD", "-o", "%i"), "--state: 'CD' is not pending or running"),
        (("nodes", "-N"), "--Node: applies to sinfo's formats"),
        (("nodes", "-o", "%N %Y"), "--format: %Y is not a field gpupool prints"),
        (("acct", "--format=JobID,Group"), "'Group' is not an sacct field gpupool prints"),
        (("acct", "-P", "-o", "id,state"), "--parsable2: applies to sacct's fields"),
        (("job", "cancel", "7_[3-1]"), "'3-1' is neither a task index"),
        (("job", "cancel", "-t", "COMPLETED"), "--state: 'COMPLETED' is not one of pending"),
        (("job", "show", "1", "--oneliner"), "--oneliner: applies to --slurm"),
        (("acct", "-j", "99999"), "--jobs: no job 99999"),
        (("acct", "-j", "1", "--since", "now-1d"), "--since/--until: not with -j/--jobs"),
        (("queue", "-j", "7_x"), "--jobs: '7_x' is neither a job id"),
    ]
    for args, why in cases:
        r = gpupool(*args, env=env)
        assert r.returncode == 2 and why in r.stderr and "Traceback" not in r.stderr, (args, r)
