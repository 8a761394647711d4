"""NVIDIA MPS control daemons, one per GPU that runs fractional shares.

``CUDA_MPS_ACTIVE_THREAD_PERCENTAGE`` and ``CUDA_MPS_PINNED_DEVICE_MEM_LIMIT`` (what a share's
environment carries) do nothing unless the CUDA driver finds an MPS control daemon. Following
NVIDIA's MPS documentation, the agent starts ``nvidia-cuda-mps-control -d`` for a GPU when the
first share workload starts on it, with ``CUDA_VISIBLE_DEVICES`` set to that GPU's UUID and its
own ``CUDA_MPS_PIPE_DIRECTORY`` and ``CUDA_MPS_LOG_DIRECTORY`` (so daemons of different GPUs
never meet); the workloads get the same pipe directory, and the daemon is stopped by writing
``quit`` to ``nvidia-cuda-mps-control`` once the last share on that GPU has ended. Where the
tool is not installed nothing is started and ``describe()`` says so.

MPS runs one server per user at a time on a GPU: with tenant users, two tenants' shares of one
card take turns at the server (the control daemon queues the second user's clients until the
first's have finished). docs/security.md says what this means and what to use instead.
"""

import contextlib
import logging
import os
import shutil
import subprocess
from pathlib import Path

log = logging.getLogger("gpupool.agent")
CONTROL = "nvidia-cuda-mps-control"


class MpsDaemons:
    def __init__(self, root: Path, binary: str | None = None):
        """``root`` holds ``<gpu-uuid>/pipe`` and ``<gpu-uuid>/log``; it must be reachable by
        the workloads' users (they connect to the daemon's pipes)."""
        self.root = root
        self.binary = binary

    def _tool(self) -> str | None:
        return self.binary or shutil.which(CONTROL)

    def describe(self) -> str:
        tool = self._tool()
        return f"MPS daemons per GPU ({tool})" if tool else f"no MPS ({CONTROL} not found)"

    def _dirs(self, uuid: str) -> tuple[Path, Path]:
        folder = self.root / uuid
        return folder / "pipe", folder / "log"

    def _env(self, uuid: str) -> dict[str, str]:
        """The control tool's environment for this GPU's daemon."""
        pipe, logs = self._dirs(uuid)
        base = {k: os.environ[k] for k in ("PATH", "LANG") if k in os.environ}
        return {
            **base,
            "CUDA_VISIBLE_DEVICES": uuid,
            "CUDA_MPS_PIPE_DIRECTORY": str(pipe),
            "CUDA_MPS_LOG_DIRECTORY": str(logs),
        }

    def running(self, uuid: str) -> bool:
        """A daemon listens for this GPU (its control pipe exists; survives agent restarts)."""
        pipe, _ = self._dirs(uuid)
        return (pipe / "control").exists()

    def ensure(self, uuid: str) -> dict[str, str]:
        """Start the GPU's daemon unless it runs; returns what its clients' environment needs
        (empty without the tool)."""
        tool = self._tool()
        if tool is None:
            return {}
        env = self._env(uuid)
        if not self.running(uuid):
            for folder in self._dirs(uuid):
                folder.mkdir(parents=True, exist_ok=True)
                folder.chmod(0o755)
            self.root.chmod(0o711)
            done = subprocess.run([tool, "-d"], env=env, capture_output=True, text=True, timeout=30)
            if done.returncode != 0:
                raise OSError(f"{CONTROL} -d for {uuid}: {(done.stderr or done.stdout).strip()}")
            log.info("started the MPS control daemon for %s", uuid)
        return {"CUDA_MPS_PIPE_DIRECTORY": env["CUDA_MPS_PIPE_DIRECTORY"]}

    def stop(self, uuid: str) -> None:
        """``echo quit | nvidia-cuda-mps-control`` for this GPU (its last share ended)."""
        tool = self._tool()
        if tool is None or not self.running(uuid):
            return
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            subprocess.run(
                [tool],
                input="quit\n",
                env=self._env(uuid),
                capture_output=True,
                text=True,
                timeout=30,
            )
            log.info("stopped the MPS control daemon for %s", uuid)
