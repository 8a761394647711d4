"""Install and start the agent's systemd unit on a server that just joined (``gpupool join
--install-service``), as ``kubeadm join`` starts the kubelet: the unit gpupool ships
(``deploy/systemd/gpupool-agent.service``, inside the wheel as ``gpupool/deploy/systemd``)
with its program pointed at this installation's ``gpupool``, then ``systemctl daemon-reload``
and ``enable --now``."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import gpupool
from gpupool.model import SpecError

UNIT = "gpupool-agent.service"
SHIPPED_PREFIX = "/opt/gpupool/bin/gpupool"  # the unit's program as shipped
SYSTEMCTL_DIRS = ("/usr/bin", "/bin", "/usr/sbin", "/sbin")  # not the caller's PATH
SYSTEMCTL_ENV = "GPUPOOL_SYSTEMCTL"  # another systemctl (tests; systemd in odd places)
SHIPPED_ENV_FILE = "EnvironmentFile=/etc/gpupool/agent.env"  # the unit's, as shipped
# what ``systemctl is-system-running`` says of a system that systemd runs (degraded: a unit
# failed; the others are passing states) — "offline" or a bus error: it does not run
SYSTEMD_RUNS = ("initializing", "starting", "running", "degraded", "maintenance", "stopping")


def shipped_unit(name: str = UNIT) -> Path:
    """The unit file as gpupool ships it: inside the installed package (a wheel), or in the
    checkout it runs from (an editable install)."""
    package = Path(gpupool.__file__).parent
    for folder in (package / "deploy" / "systemd", package.parents[1] / "deploy" / "systemd"):
        if (folder / name).is_file():
            return folder / name
    raise SpecError(f"{name}: not found beside this installation of gpupool ({package})")


def this_gpupool() -> str:
    """The ``gpupool`` program of the running installation (its virtual environment's)."""
    beside = Path(sys.executable).with_name("gpupool")
    if beside.is_file():
        return str(beside)
    found = shutil.which("gpupool")
    if found is None:
        raise SpecError("cannot tell where this gpupool's program is: give the unit by hand")
    return str(Path(found).resolve())


def unit_text(program: str, env_file: Path | None = None) -> str:
    """The shipped unit, its program this installation's and its ``EnvironmentFile`` the
    one the join wrote (an absolute path, as systemd needs)."""
    text = shipped_unit().read_text().replace(SHIPPED_PREFIX, program)
    if env_file is not None:
        text = text.replace(SHIPPED_ENV_FILE, f"EnvironmentFile={env_file.absolute()}")
    return text


def lines(text: str) -> str:
    """A program's several lines of output as one line of an error ("a; b")."""
    return "; ".join(line.strip() for line in text.splitlines() if line.strip())


def _systemctl() -> str:
    given = os.environ.get(SYSTEMCTL_ENV)
    if given:
        return given
    for folder in SYSTEMCTL_DIRS:
        candidate = Path(folder) / "systemctl"
        if candidate.is_file():
            return str(candidate)
    raise SpecError("systemctl: not found; this host does not run systemd (start the agent "
                    "with its own command: gpupool agent ...)")  # fmt: skip


def preflight() -> None:
    """What --install-service needs, checked before a bootstrap token is spent: the unit,
    this installation's program, and systemd running (not only its systemctl installed:
    a container or chroot has the one without the other)."""
    shipped_unit()
    this_gpupool()
    systemctl = _systemctl()
    try:
        done = subprocess.run(
            [systemctl, "is-system-running"], capture_output=True, text=True, timeout=60
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise SpecError(f"{systemctl} is-system-running: {exc}") from None
    state = done.stdout.strip().split("\n")[0]
    if state not in SYSTEMD_RUNS:
        said = lines(f"{done.stdout}\n{done.stderr}") or f"exit code {done.returncode}"
        raise SpecError(
            f"systemd is not running on this host (systemctl is-system-running: {said}): "
            "--install-service needs it. Nothing was spent: join without --install-service "
            "and start the agent with its own command (gpupool agent ...)"
        )


def install_and_start(unit_dir: Path, env_file: Path | None = None) -> Path:
    """Write the unit into ``unit_dir`` (reading ``env_file``), reload systemd, enable and
    start the agent; returns the unit's path. A step that fails says which and what was
    done before it."""
    unit_dir.mkdir(parents=True, exist_ok=True)
    path = unit_dir / UNIT
    path.write_text(unit_text(this_gpupool(), env_file))
    systemctl = _systemctl()
    for args in (["daemon-reload"], ["enable", "--now", UNIT.removesuffix(".service")]):
        done = subprocess.run(
            [systemctl, *args], capture_output=True, text=True, timeout=120, check=False
        )
        if done.returncode != 0:
            raise SpecError(
                f"systemctl {' '.join(args)} failed ({lines(done.stderr) or done.returncode}); "
                f"the unit is written at {path}"
            )
    return path
