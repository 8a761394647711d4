"""What a job's submitter chooses never steers another person's CLI: ``job wait`` writes a
log only for the person who asked for it, inside their current directory (it overwrote an
admin's ``~/.bashrc``), and control characters in names and reasons never reach a terminal
(an escape sequence in a job name reached the admin's)."""

from tests.support.cli import gpupool
from tests.support.cluster import ok, seed_cluster


def test_an_output_path_outside_the_directory_is_written_by_no_client(sqlite_server, tmp_path):
    """Issue 63: an absolute --output (shared storage) or one with .. is Slurm's to accept —
    its node writes it as the job's own user — but no gpupool client writes it, not even the
    submitter's own ``job wait``: it saves only paths inside the directory it runs in. A
    leading ~ (which sbatch does not expand) is refused."""
    srv = sqlite_server
    admin = srv.admin()
    seed_cluster(admin, nodes=1, tenants={"algo": 4})
    refused = admin.post(
        "/api/v1/jobs",
        json={"request": "gpu=1", "tenant": "algo", "command": ["true"], "output": "~/.bashrc"},
    )
    assert refused.status_code == 422 and refused.json()["field"] == "output", refused.text
    assert "starts with ~, which sbatch does not expand" in refused.json()["detail"]
    box = tmp_path / "box"
    here = box / "here"
    here.mkdir(parents=True)
    victim = box / "victim"
    env = {"GPUPOOL_SERVER": srv.url, "GPUPOOL_TOKEN": srv.admin_token}
    for output in (str(victim), "../up.out", "logs/../../up2.out"):
        body = {"request": "gpu=1", "tenant": "algo", "command": ["true"], "output": output,
                "hold": True}  # fmt: skip
        job = ok(admin.post("/api/v1/jobs", json=body), 201)
        ok(admin.post(f"/api/v1/jobs/{job['id']}/cancel"))
        r = gpupool("job", "wait", str(job["id"]), env=env, cwd=here)
        assert "its node's to write, as the job's own user" in r.stderr, (output, r.stderr)
    assert sorted(p.name for p in box.iterdir()) == ["here"], list(box.iterdir())
    assert list(here.iterdir()) == []
    # a backslash turns sbatch's expansion off and is dropped (Slurm): a plain file here
    body = {"request": "gpu=1", "tenant": "algo", "command": ["true"], "hold": True,
            "output": "a\\..\\..\\b"}  # fmt: skip
    job = ok(admin.post("/api/v1/jobs", json=body), 201)
    ok(admin.post(f"/api/v1/jobs/{job['id']}/cancel"))
    r = gpupool("job", "wait", str(job["id"]), env=env, cwd=here)
    assert [p.name for p in here.iterdir()] == ["a....b"], r.stderr


def test_a_job_name_cannot_lead_a_client_to_write_out_of_its_directory(sqlite_server, tmp_path):
    srv = sqlite_server
    admin = srv.admin()
    seed_cluster(admin, nodes=1, tenants={"algo": 4})
    body = {"request": "gpu=1", "tenant": "algo", "command": ["true"], "name": "..",
            "output": "%x/up.out", "hold": True}  # fmt: skip
    job = ok(admin.post("/api/v1/jobs", json=body), 201)  # its node's, as its user, to write
    ok(admin.post(f"/api/v1/jobs/{job['id']}/cancel"))
    box = tmp_path / "box"
    here = box / "here"
    here.mkdir(parents=True)
    env = {"GPUPOOL_SERVER": srv.url, "GPUPOOL_TOKEN": srv.admin_token}
    r = gpupool("job", "wait", str(job["id"]), env=env, cwd=here)
    assert "../up.out: its node's to write" in r.stderr, r.stderr
    assert sorted(p.name for p in box.iterdir()) == ["here"]


def test_job_wait_writes_a_log_only_for_its_submitter_inside_their_directory(
    sqlite_server, tmp_path
):
    srv = sqlite_server
    admin = srv.admin()
    seed_cluster(admin, nodes=1, tenants={"algo": 4})
    alice_token = srv.token("alice", "member", "algo")
    alice = srv.client(alice_token)
    body = {"request": "gpu=1", "command": ["true"], "output": "logs/%j.out", "hold": True}
    job = ok(alice.post("/api/v1/jobs", json=body), 201)
    ok(alice.post(f"/api/v1/jobs/{job['id']}/cancel"))
    admin_dir, alice_dir = tmp_path / "admin", tmp_path / "alice"
    admin_dir.mkdir()
    alice_dir.mkdir()
    as_admin = {"GPUPOOL_SERVER": srv.url, "GPUPOOL_TOKEN": srv.admin_token}
    r = gpupool("job", "wait", str(job["id"]), env=as_admin, cwd=admin_dir)
    assert f"job {job['id']}: log not saved (its --output was chosen by alice" in r.stderr
    assert list(admin_dir.iterdir()) == []
    # alice's own wait writes it, in her directory, and follows no symlink planted there:
    # the log is written aside and renamed over the link, so its target stays untouched
    (alice_dir / "logs").mkdir()
    target = tmp_path / "elsewhere"
    log = alice_dir / "logs" / f"{job['id']}.out"
    log.symlink_to(target)
    as_alice = {"GPUPOOL_SERVER": srv.url, "GPUPOOL_TOKEN": alice_token}
    r = gpupool("job", "wait", str(job["id"]), env=as_alice, cwd=alice_dir)
    assert f"log saved to logs/{job['id']}.out" in r.stderr, r.stderr
    assert not target.exists() and not log.is_symlink() and log.is_file()
    # a planted symlinked folder is not followed either
    log.unlink()
    (alice_dir / "logs").rmdir()
    (tmp_path / "outside").mkdir()
    (alice_dir / "logs").symlink_to(tmp_path / "outside")
    r = gpupool("job", "wait", str(job["id"]), env=as_alice, cwd=alice_dir)
    assert "leads out of" in r.stderr and list((tmp_path / "outside").iterdir()) == [], r.stderr


def test_control_characters_never_reach_the_terminal(sqlite_server):
    srv = sqlite_server
    admin = srv.admin()
    seed_cluster(admin, nodes=1, tenants={"algo": 4})
    name = "\x1b]0;owned\x07\x1b[2J\x9b31m[red]x[/red]\rtrain"
    body = {"request": "gpu=1", "tenant": "algo", "command": ["true"], "name": name}
    job = ok(admin.post("/api/v1/jobs", json=body), 201)
    env = {"GPUPOOL_SERVER": srv.url, "GPUPOOL_TOKEN": srv.admin_token, "COLUMNS": "200"}
    for args in (("job", "list"), ("job", "show", str(job["id"])), ("queue",),
                 ("acct", "-o", "id,name", "--csv")):  # fmt: skip
        r = gpupool(*args, env=env)
        assert r.returncode == 0, r.stderr
        assert not any(c in r.stdout for c in "\x1b\x07\x9b\r"), (args, r.stdout)
        if args[:2] in (("job", "list"), ("job", "show")) and "--csv" not in args:
            assert "\\x1b]0;owned\\x07" in r.stdout and "[red]x[/red]" in r.stdout, r.stdout


def test_a_missing_script_is_an_error_naming_it_before_anything_is_sent(sqlite_server, tmp_path):
    admin = sqlite_server.admin()
    seed_cluster(admin, nodes=1, tenants={"algo": 4})
    env = {"GPUPOOL_SERVER": sqlite_server.url, "GPUPOOL_TOKEN": sqlite_server.admin_token}
    for argv in (["nosuch.sh"], ["--tenant", "algo", "nosuch.sh"], ["--tenant", "algo", "x/run"]):
        r = gpupool("job", "submit", *argv, env=env, cwd=tmp_path)
        assert r.returncode == 2, r.stdout
        assert f"{argv[-1]}: no such file" in r.stderr and "422" not in r.stderr
    assert ok(admin.get("/api/v1/jobs"))["total"] == 0  # nothing was sent
    # after --, a program only the node has is a command, as before
    r = gpupool("job", "submit", "--tenant", "algo", "--", "nosuch.sh", env=env, cwd=tmp_path)
    assert r.returncode == 0 and ok(admin.get("/api/v1/jobs"))["total"] == 1
