"""The ``docker run`` / ``podman run`` command line of a job with an image. Pure.

No user string can become a flag of the runtime or reach the runtime's client: the image is
checked against the OCI reference grammar (it never starts with ``-``), ``--`` ends the
runtime's options before it, the command comes after the image (the container's arguments),
and the variables go into the container through an env file in the agent's own folder (not
``-e NAME=value``, which every user of the node could read in ``ps``); the client itself is run
by absolute path with an environment of the agent's (``client_env``), never the job's. The
container runs as the tenant's user when the agent isolates tenants, without gaining
privileges, with the grant's CPU, memory and process limits (the runtime's daemon, not the
shim, owns the container's cgroup).
"""

import os
import shutil
from collections.abc import Mapping, Sequence

from gpupool.agent.identity import Identity
from gpupool.model import SpecError
from gpupool.model.workload import check_env_name, check_image

RUNTIMES = ("docker", "podman")
CONTAINER_ENV_FILE = "container.env"
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# What the operator may have set for the agent to reach its runtime's daemon (never a job's)
CLIENT_ENV_KEEP = ("HOME", "LANG", "DOCKER_HOST", "DOCKER_CONFIG", "CONTAINER_HOST")


def find_runtime() -> str | None:
    """The absolute path of the first runtime client installed in the system's own folders."""
    for name in RUNTIMES:
        found = shutil.which(name, path=SYSTEM_PATH)
        if found:
            return os.path.realpath(found)
    return None


def client_env() -> dict[str, str]:
    """The runtime client's environment: a system PATH and what the agent's operator set."""
    keep = {k: os.environ[k] for k in CLIENT_ENV_KEEP if k in os.environ}
    return {"PATH": SYSTEM_PATH, **keep}


def env_file(env: Mapping[str, str]) -> str:
    """The job's variables as ``docker run --env-file`` reads them (one ``NAME=value`` a line;
    names checked here, one-line values checked at intake)."""
    lines = []
    for key in sorted(env):
        check_env_name(key)
        value = env[key]
        if "\n" in value or "\r" in value:
            raise SpecError(f"env.{key}: a container variable must be one line", field="env")
        lines.append(f"{key}={value}\n")
    return "".join(lines)


def container_argv(
    runtime: str,
    alloc_id: int,
    image: str,
    command: Sequence[str],
    env_path: str,
    *,
    identity: Identity | None = None,
    cpu_millis: int = 0,
    mem_mib: int = 0,
    pids_max: int = 4096,
    gpus: str | None = None,
    publish: int | None = None,
    control: int | None = None,
) -> list[str]:
    check_image(image)
    argv = [runtime, "run", "--rm", "--name", f"gpupool-alloc-{alloc_id}"]
    argv += ["--security-opt", "no-new-privileges", "--pids-limit", str(pids_max)]
    if identity is not None:
        argv += ["--user", f"{identity.uid}:{identity.gid}"]
    if cpu_millis > 0:
        argv += ["--cpus", f"{cpu_millis / 1000:g}"]
    if mem_mib > 0:
        argv += ["--memory", f"{mem_mib}m"]
    argv += ["--env-file", env_path]  # env_file(env), written by the agent, 0600
    if gpus not in (None, "", "void"):
        argv += ["--gpus", f"device={gpus}"]
    if publish is not None:  # a service replica: its port on the node's addresses
        argv += ["--publish", f"{publish}:{publish}"]
    if control is not None:  # its control endpoints: the host's loopback only (the agent)
        argv += ["--publish", f"127.0.0.1:{control}:{control}"]
    return [*argv, "--", image, *command]
