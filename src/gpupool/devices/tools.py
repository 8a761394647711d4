"""Run a vendor's command-line tool: its output, or a clear reason why there is none."""

import shutil
import subprocess

from gpupool.devices.base import BackendUnavailable, DiscoveryError

TIMEOUT_S = 20.0


def run_tool(argv: list[str], timeout_s: float = TIMEOUT_S) -> str:
    """stdout of ``argv``. A missing tool is ``BackendUnavailable``; a failing or hanging one
    is a ``DiscoveryError`` naming the command and what it said."""
    if shutil.which(argv[0]) is None:
        raise BackendUnavailable(f"{argv[0]}: not installed")
    command = " ".join(argv)
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        raise DiscoveryError(f"{command}: no answer within {timeout_s:.0f} s") from None
    except OSError as exc:
        raise DiscoveryError(f"{command}: cannot run ({exc})") from None
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        raise DiscoveryError(f"{command}: exit {done.returncode}: {said[-1] if said else ''}")
    return done.stdout
