"""Notebook sessions for the tests: the stand-in app (``notebook_app``) run as a notebook
job, through the CLI or the API, and what the CLI printed read back."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import httpx

from tests.support.agents import in_state, wait_for
from tests.support.cluster import ok

APP = Path(__file__).with_name("notebook_app.py")
# the node's own python: a tenant's user cannot reach the test's virtual environment
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable


def app_copy(folder: Path) -> str:
    """The app where a tenant's user can read it."""
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o755)
    path = folder / "notebook_app.py"
    shutil.copy(APP, path)
    path.chmod(0o644)
    return str(path)


def cli_notebook(url: str, token: str, *args: str, timeout: float = 120) -> tuple[int, str]:
    """``gpupool notebook ARGS``: its exit code and what it printed (stdout and stderr)."""
    env = {**os.environ, "GPUPOOL_SERVER": url, "GPUPOOL_TOKEN": token,
           "GPUPOOL_CONFIG_DIR": "/nonexistent-gpupool-config", "COLUMNS": "200"}  # fmt: skip
    done = subprocess.run([sys.executable, "-m", "gpupool.cli.main", "notebook", *args],
                          env=env, capture_output=True, text=True, timeout=timeout)  # fmt: skip
    return done.returncode, done.stdout + done.stderr


def printed(text: str) -> tuple[int, str, str]:
    """The job id, the login link and the token URL ``gpupool notebook`` printed."""
    job = re.search(r"notebook job (\d+)", text)
    login = re.search(r"(http\S+/notebook-login\?ticket=\S+)", text)
    plain = re.search(r"with your token \(Authorization: Bearer \.\.\.\): (http\S+)", text)
    assert job and login and plain, text
    return int(job.group(1)), login.group(1), plain.group(1)


def running_notebook(client: httpx.Client, tenant: str, request: str = "gpu=1") -> dict:
    """A notebook job of ``tenant`` running the stand-in app (its source given to ``python
    -c``: the sandbox's own /tmp and /var/tmp are private), its app answering."""
    body = {"request": request, "tenant": tenant, "interactive": "notebook",
            "max_runtime_s": 900, "command": [PYTHON, "-c", APP.read_text()]}  # fmt: skip
    job = ok(client.post("/api/v1/jobs", json=body), 201)
    done = wait_for("the notebook", in_state(client, job["id"], "running"), 30)
    assert isinstance(done, dict)
    base = f"/api/v1/jobs/{job['id']}/notebook/"
    last: list[httpx.Response] = []

    def answers() -> bool:
        last[:] = [client.get(base)]
        return last[0].status_code == 200

    try:
        wait_for("its app", answers, 30)
    except AssertionError:
        logs = client.get(f"/api/v1/jobs/{job['id']}/logs").text[-2000:]
        raise AssertionError(f"{last[0].status_code} {last[0].text[:500]}; logs {logs}") from None
    return done
