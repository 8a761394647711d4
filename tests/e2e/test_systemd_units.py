"""The service units an operator installs (deploy/systemd): systemd's own checker finds no
fault in them, and the agent's ExecStart line, run as written with its environment file's
variables (the install prefix and state folder pointed at this test's, a simulated card and no
cgroups added), brings a node to the server and stops cleanly on the SIGTERM systemd sends."""

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.agents import wait_for
from tests.support.paths import ROOT

UNITS = ROOT / "deploy" / "systemd"
PREFIX = "/opt/gpupool/bin/gpupool"  # where docs/operations.md installs it
HERE = str(Path(sys.executable).with_name("gpupool"))


def _systemd_analyze() -> str:
    found = shutil.which("systemd-analyze")
    if found is None:
        if os.environ.get("GPUPOOL_REQUIRE_ROOT"):
            raise RuntimeError("systemd-analyze is missing (CI installs systemd)")
        pytest.skip("systemd-analyze is not installed (apt-get install systemd)")
    return found


def _here(unit: Path, tmp_path: Path) -> Path:
    """The unit with its program where this test's virtual environment has it."""
    copy = tmp_path / unit.name
    copy.write_text(unit.read_text().replace(PREFIX, HERE))
    return copy


def test_every_unit_passes_systemd_analyze_verify(tmp_path):
    analyze = _systemd_analyze()
    units = sorted(UNITS.glob("*.service"))
    assert {u.name for u in units} == {"gpupool-server.service", "gpupool-agent.service"}
    for unit in units:
        assert PREFIX in unit.read_text(), unit.name
    copies = [str(_here(u, tmp_path)) for u in units]
    out = subprocess.run([analyze, "verify", *copies], capture_output=True, text=True)
    # a misspelt key or value is only a warning to systemd: any line at all fails here
    assert out.returncode == 0 and out.stdout + out.stderr == "", out.stdout + out.stderr


def test_a_misspelt_unit_is_caught(tmp_path):
    analyze = _systemd_analyze()
    unit = _here(UNITS / "gpupool-server.service", tmp_path)
    unit.write_text(unit.read_text().replace("RestartSec=", "RestartSecs="))
    out = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True)
    assert "Unknown key 'RestartSecs'" in out.stdout + out.stderr


def _directives(unit: Path) -> dict[str, str]:
    return dict(
        line.split("=", 1)
        for line in unit.read_text().splitlines()
        if re.match(r"^[A-Z][A-Za-z]+=", line)
    )


def test_the_agent_units_command_line_runs_as_written(sqlite_server, tmp_path):
    unit = _directives(UNITS / "gpupool-agent.service")
    assert unit["EnvironmentFile"] == "/etc/gpupool/agent.env" and unit["KillMode"] == "process"
    token = sqlite_server.token("agent-unit1", "agent", node="unit1")
    env = {"GPUPOOL_SERVER": sqlite_server.url, "GPUPOOL_AGENT_TOKEN": token}
    line = unit["ExecStart"].replace(PREFIX, HERE)
    line = line.replace("/var/lib/gpupool-agent", str(tmp_path / "state"))
    argv = [re.sub(r"\$\{(\w+)\}", lambda m: env[m.group(1)], word) for word in line.split()]
    argv += ["--name", "unit1", "--devices", "simulated:1xA100-80G", "--isolation", "none",
             "--no-cgroups", "--work-dir", str(tmp_path / "work")]  # fmt: skip
    agent = subprocess.Popen(
        argv, env={**os.environ, **env}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        admin = sqlite_server.admin()

        def ready() -> bool:
            r = admin.get("/api/v1/nodes/unit1")
            return r.status_code == 200 and r.json()["state"] == "ready"

        wait_for("the unit's agent registered", ready, 60)
    finally:
        agent.send_signal(signal.SIGTERM)  # what KillMode=process sends
        _, err = agent.communicate(timeout=30)
    assert agent.returncode == 0, err
