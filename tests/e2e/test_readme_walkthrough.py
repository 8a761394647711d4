"""The README's walk-through, line by line, on a fresh ``gpupool up --demo``: every ``$``
line runs in bash from a folder laid out as the README assumes (``.venv``, ``examples``,
``gpupool-data``), and the lines shown under it must appear in its output, in order (``…``
stands for anything; runs of spaces compare as one). A command whose shown output starts with
``error:`` must exit 2, every other one 0."""

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx

from gpupool.client import wait_until_healthy
from gpupool.server.process import free_port
from tests.support.agents import wait_for
from tests.support.paths import ROOT


def walkthrough() -> list[tuple[str, list[str]]]:
    """(command, shown output lines) from the README's marked console block."""
    text = (ROOT / "README.md").read_text()
    block = text.split("<!-- walkthrough:start -->", 1)[1].split("<!-- walkthrough:end -->")[0]
    steps: list[tuple[str, list[str]]] = []
    for line in block.splitlines():
        if line.startswith("```"):
            continue
        if line.startswith("$ "):
            steps.append((line[2:], []))
        elif line.strip():
            steps[-1][1].append(line)
    return steps


def _pattern(shown: str) -> re.Pattern[str]:
    parts = [re.escape(" ".join(p.split())) for p in shown.split("…")]
    return re.compile("^" + ".*".join(parts) + "$")


def appears_in_order(shown: list[str], output: str) -> str | None:
    """None when every shown line matches an output line, in order; else the first that
    does not."""
    lines = [" ".join(line.split()) for line in output.splitlines()]
    at = 0
    for want in shown:
        pattern = _pattern(want)
        while at < len(lines) and not pattern.match(lines[at]):
            at += 1
        if at == len(lines):
            return want
        at += 1
    return None


def test_the_walkthrough_matcher():
    out = "id  tenant\n5   algo  PD  0:03  gpu=4  quota: …\n1  algo R\n"
    assert appears_in_order(["id tenant", "5 algo PD … gpu=4 …", "1   algo  R"], out) is None
    assert appears_in_order(["1 algo R", "5 algo …"], out) == "5 algo …"  # order counts
    assert appears_in_order(["7 algo R"], out) == "7 algo R"


def test_the_readme_walkthrough_works_line_by_line(tmp_path):
    steps = walkthrough()
    assert len(steps) >= 20
    port = str(free_port())
    (tmp_path / ".venv").symlink_to(Path(sys.executable).parent.parent)
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    env = {
        **os.environ,
        "GPUPOOL_CONFIG_DIR": str(tmp_path / "config"),
        "PYTHONUNBUFFERED": "1",  # stdout and stderr interleave as they were written
        "COLUMNS": "80",
    }
    for name in ("GPUPOOL_SERVER", "GPUPOOL_TOKEN", "GPUPOOL_PROFILE"):
        env.pop(name, None)
    up = subprocess.Popen(
        [sys.executable, "-m", "gpupool.cli.main", "up", "--demo", "--port", port],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_healthy(url, lambda: up.poll() is None)
        token = (tmp_path / "gpupool-data" / "admin-token").read_text().strip()
        admin = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"})

        def demo_running() -> bool:  # the demo's 22 jobs are in, and most run
            jobs = admin.get("/api/v1/jobs", params={"limit": 100}).json()
            running = sum(j["state"] == "running" for j in jobs["items"])
            return jobs["total"] == 22 and running >= 20

        wait_for("the demo's jobs", demo_running, 90)
        for command, shown in steps:
            run = subprocess.run(
                ["bash", "-c", command.replace("8080", port)],
                cwd=tmp_path,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                timeout=360,
            )
            expected_rc = 2 if shown and shown[0].startswith("error:") else 0
            assert run.returncode == expected_rc, (command, run.stdout)
            missing = appears_in_order([s.replace("8080", port) for s in shown], run.stdout)
            assert missing is None, f"$ {command}\nshown: {missing!r}\nprinted:\n{run.stdout}"
        # a log the CLI saved is the job's output alone: the node's note why it could not
        # write it there (a mkdir refused) is not true of the file, and stays in job logs
        saved = (tmp_path / "logs" / "sweep-7.out").read_text()
        assert saved.startswith("trial 7 of 8 on node-") and "gpupool:" not in saved, saved
    finally:
        up.send_signal(signal.SIGTERM)
        up.wait(timeout=60)
