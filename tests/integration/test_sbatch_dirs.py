"""sbatch's directories and output files, end to end (the CLI, a server with its loop, an
agent running real processes): a job runs in its submit directory when its node has it and
its user may enter it, else in a work folder of its own; --chdir picks the directory (and a
job whose --chdir cannot be entered fails saying so); --output / --error patterns are written
by the node when the job ends — without --wait — as the job's own user, never as root."""

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from gpupool.agent.workloads import IsolationConfig
from tests.support.agents import (
    in_state,
    no_workload_outlives_its_test,  # noqa: F401
    two_teams_and_a_node,
    wait_for,
)
from tests.support.cli import gpupool
from tests.support.cluster import ok

ROOT = os.geteuid() == 0


@pytest.fixture
def cluster(tmp_path):
    """As root, workloads run as their tenant's own user, each with a private /tmp."""
    isolation = None
    work = Path(tempfile.mkdtemp(prefix="gpupool-test-work-", dir="/tmp"))
    if ROOT:
        isolation = IsolationConfig(
            mode="tenant-users", user_prefix="gpt-", work_dir=work, network=False
        )
    try:
        with two_teams_and_a_node(tmp_path, isolation) as srv:
            yield srv
    finally:
        shutil.rmtree(work, ignore_errors=True)


@pytest.fixture
def shared(tmp_path):
    """A directory the node and the job's user share, as a cluster's shared file system: as
    root, outside /tmp and /var/tmp (each workload has private ones) and open to the tenant's
    user."""
    if not ROOT:
        yield tmp_path / "shared"
        return
    Path("/srv").mkdir(mode=0o755, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix="gpupool-shared-", dir="/srv"))
    path.chmod(0o1777)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _submit(srv, cwd: Path, *args: str) -> dict:
    env = {"GPUPOOL_SERVER": srv.url, "GPUPOOL_TOKEN": srv.admin_token}
    r = gpupool("job", "submit", "--tenant", "algo", "--json", *args, env=env, cwd=cwd)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _ended(srv, job: dict) -> dict:
    admin = srv.admin()
    return wait_for(
        f"job {job['id']} ended",
        lambda: (j := ok(admin.get(f"/api/v1/jobs/{job['id']}")))["finished_at"] and j,
        60,
    )


def _log(srv, job_id: int) -> str:
    chunks = ok(srv.admin().get(f"/api/v1/jobs/{job_id}/logs"))["chunks"]
    return "".join(c["text"] for c in chunks)


def test_a_job_runs_in_its_submit_directory_and_its_node_writes_its_files(cluster, shared):
    shared.mkdir(exist_ok=True)
    script = shared / "demo.sh"
    script.write_text(
        "#!/bin/sh\n#GPUPOOL --cpu 1 --name demo --output logs/%x-%j.out --error err/%j.err\n"
        'pwd; echo "submitted from $GPUPOOL_SUBMIT_DIR"; echo oops >&2\n'
    )
    job = _submit(cluster, shared, "demo.sh")  # no --wait: the node writes them
    assert _ended(cluster, job)["state"] == "succeeded"
    out = shared / "logs" / f"demo-{job['id']}.out"
    err = shared / "err" / f"{job['id']}.err"
    assert out.read_text() == f"{shared}\nsubmitted from {shared}\n"
    assert err.read_text() == "oops\n"
    if ROOT:  # written by the job's user, not by the root-run agent
        owner = out.stat().st_uid
        assert owner != 0 and err.stat().st_uid == owner
    # --chdir: another directory, relative to where the command runs; stderr joins --output
    (shared / "data").mkdir(mode=0o1777)
    (shared / "data").chmod(0o1777)
    job = _submit(cluster, shared, "--chdir", "data", "--output", "%j.log", "--",
                  "sh", "-c", "pwd; echo warn >&2")  # fmt: skip
    assert _ended(cluster, job)["state"] == "succeeded"
    assert (shared / "data" / f"{job['id']}.log").read_text() == f"{shared}/data\nwarn\n"


def test_a_chdir_that_cannot_be_entered_fails_the_job_saying_so(cluster, shared):
    shared.mkdir(exist_ok=True)
    job = _submit(cluster, shared, "--chdir", "/nonexistent/place", "--", "true")
    ended = _ended(cluster, job)
    assert ended["state"] == "failed"
    assert "--chdir /nonexistent/place: No such file or directory" in ended["reason"], ended


@pytest.mark.skipif(not ROOT, reason="needs root: a directory the job's user may not enter")
def test_without_its_submit_directory_a_job_runs_in_its_work_folder_and_root_writes_nothing(
    cluster, tmp_path
):
    private = tmp_path / "private"  # root's 0700 tree under /tmp: not the tenant's
    private.mkdir()
    job = _submit(cluster, private, "--output", "x.out", "--", "sh", "-c", "pwd")
    assert _ended(cluster, job)["state"] == "succeeded"
    log = _log(cluster, job["id"])
    ran_in = log.splitlines()[0]
    assert ran_in != str(private) and "alloc-" in ran_in, log  # its work folder
    assert "--output not written: x.out: the job's directory" in log, log
    in_state(cluster.admin(), job["id"], "succeeded")
    # the root-run agent never writes it for the job; the submitter's own gpupool saves it
    # (cli.deliver: here the submitter is this test, root too), without the node's note
    out = private / "x.out"
    wait_for("x.out delivered", lambda: out.exists() and out.read_text() == f"{ran_in}\n", 60)


def _sbatch(srv, cwd: Path, *args: str, stdin: str | None = None):
    env = {"GPUPOOL_SERVER": srv.url, "GPUPOOL_TOKEN": srv.admin_token}
    return gpupool("sbatch", *args, env=env, cwd=cwd, stdin=stdin)


@pytest.mark.skipif(not ROOT, reason="needs root: a directory the job's user may not enter")
def test_an_output_its_node_cannot_write_is_said_in_the_reason_and_reaches_the_submitter(
    cluster, tmp_path
):
    """Issue 59, finding 4: under gpupool up as root a Slurm job runs as gp-<team>, which
    cannot write into the submitter's folder; the job said succeeded, the file never came,
    and why was only in its log. Now the reason says so, and the submitter's own gpupool
    (a background deliverer sbatch starts, as --wait does in the foreground) saves the output
    there — stdout to -o, stderr to -e."""
    private = tmp_path / "private"  # root's tree: not the tenant's
    private.mkdir()
    (private / "job.sh").write_text("#!/bin/sh\n#SBATCH -A algo\necho hello; echo oops >&2\n")
    sent = _sbatch(cluster, private, "-e", "slurm-%j.err", "job.sh")
    assert sent.returncode == 0, sent.stderr
    job_id = int(sent.stdout.split()[-1])
    assert f"slurm-{job_id}.out" in sent.stderr, sent.stderr  # the submitter is told where
    ended = _ended(cluster, {"id": job_id})
    assert ended["state"] == "succeeded"
    assert "--output not written" in ended["reason"], ended["reason"]
    out, err = private / f"slurm-{job_id}.out", private / f"slurm-{job_id}.err"
    wait_for("the output delivered", lambda: out.exists() and err.exists(), 60)
    time.sleep(0.5)  # written whole (each file is written, then renamed in place)
    assert out.read_text() == "hello\n"
    assert err.read_text() == "oops\n"


@pytest.mark.skipif(not ROOT, reason="needs root: a directory the job's user may not enter")
def test_sbatch_wait_writes_stderr_to_its_own_error_file(cluster, tmp_path):
    private = tmp_path / "private"
    private.mkdir()
    (private / "job.sh").write_text("#!/bin/sh\necho to-out; echo to-err >&2\n")
    done = _sbatch(cluster, private, "-A", "algo", "--wait", "-o", "o-%j.txt", "-e", "e-%j.txt",
                   "job.sh")  # fmt: skip
    assert done.returncode == 0, done.stderr
    job_id = int(done.stdout.split()[-1])
    assert (private / f"o-{job_id}.txt").read_text() == "to-out\n"
    assert (private / f"e-{job_id}.txt").read_text() == "to-err\n"


@pytest.mark.parametrize(
    ("script", "words"),
    [("", "Batch script is empty"), ("  \n\n\t\n", "Batch script contains only whitespace")],
)
def test_sbatch_refuses_an_empty_script_as_slurm_does(sqlite_server, tmp_path, script, words):
    (tmp_path / "empty.sh").write_text(script)
    for args, stdin in ((["empty.sh"], None), ([], script)):
        r = _sbatch(sqlite_server, tmp_path, "-A", "algo", *args, stdin=stdin)
        assert r.returncode == 2 and words in r.stderr, r.stderr
        assert "Traceback" not in r.stderr
    assert ok(sqlite_server.admin().get("/api/v1/jobs"))["total"] == 0


def test_sbatch_without_an_account_names_the_option(sqlite_server, tmp_path):
    ok(sqlite_server.admin().post("/api/v1/tenants", json={"name": "algo"}), 201)
    (tmp_path / "job.sh").write_text("#!/bin/sh\necho hi\n")
    r = _sbatch(sqlite_server, tmp_path, "job.sh")
    assert r.returncode == 2 and "-A/--account" in r.stderr, r.stderr
    assert "#SBATCH --account" in r.stderr


@pytest.mark.skipif(not ROOT, reason="needs root: workloads run as their tenant's user")
def test_an_absolute_output_is_written_by_its_node_as_the_jobs_user_or_not_at_all(
    cluster, shared, tmp_path
):
    """Issue 63: sbatch's absolute --output / --error on shared storage (/scratch/...) are
    written as the job's own user, so the file system's permissions decide — never by root,
    never by the submitter's gpupool. %J is the batch script's job id, as in Slurm."""
    logs = shared / "abs"
    logs.mkdir(mode=0o1777)
    logs.chmod(0o1777)
    locked = Path(tempfile.mkdtemp(prefix="gpupool-root-only-", dir="/srv"))  # 0700, root's
    try:
        (tmp_path / "job.sh").write_text(
            f"#!/bin/sh\n#SBATCH -A algo -J abs\n#SBATCH -o {logs}/%x.%J.out\n"
            f"#SBATCH -e {locked}/%j.err\necho hello; echo oops >&2\n"
        )
        sent = _sbatch(cluster, tmp_path, "job.sh")
        assert sent.returncode == 0, sent.stderr
        job_id = int(sent.stdout.split()[-1])
        theirs = (
            f"{logs}/abs.{job_id}.out, {locked}/{job_id}.err: its node's to write, as the job's"
        )
        assert theirs in sent.stderr, sent.stderr
        ended = _ended(cluster, {"id": job_id})
        out = logs / f"abs.{job_id}.out"
        assert out.read_text() == "hello\n"
        assert out.stat().st_uid != 0  # the job's user wrote it
        assert ended["state"] == "succeeded"
        assert f"--output not written: {locked}/{job_id}.err" in ended["reason"], ended
        time.sleep(1)  # nothing else writes it: not root, not the submitter's deliverer
        assert not (locked / f"{job_id}.err").exists()
    finally:
        shutil.rmtree(locked, ignore_errors=True)


def test_sbatch_names_everything_it_cannot_honour_at_once(sqlite_server, tmp_path):
    """Issue 63: every directive is checked before refusing; the refusal lists all, the most
    fundamental first (the script itself, resources, then the site's names)."""
    (tmp_path / "job.sh").write_text(
        "#!/bin/sh\n#SBATCH -p nowhere\n#SBATCH --gres=gpumem:20g\n#SBATCH -A algo\n"
        "#SBATCH hetjob\n#SBATCH -N 2\ntrue\n"
    )
    r = _sbatch(sqlite_server, tmp_path, "job.sh")
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    said = r.stderr
    at = [said.find(w) for w in ("line 5: a heterogeneous job", "line 3: --gres=gpumem:20g",
                                 "line 2: --partition=nowhere")]  # fmt: skip
    assert all(i >= 0 for i in at) and at == sorted(at), said
    assert "3 things gpupool cannot honour" in said
