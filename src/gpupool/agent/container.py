"""The ``docker run`` / ``podman run`` command line of a job with an image. Pure.

No user string can become a flag of the runtime: the image is checked against the OCI
reference grammar (it never starts with ``-``), ``--`` ends the runtime's options before it,
the command comes after the image (the container's arguments), and every variable is one
``-e NAME=value`` argument with a POSIX name. The container runs as the tenant's user when the
agent isolates tenants, without gaining privileges, with the grant's CPU, memory and process
limits (the runtime's daemon, not the shim, owns the container's cgroup).
"""

from collections.abc import Mapping, Sequence

from gpupool.agent.identity import Identity
from gpupool.model.workload import check_env_name, check_image

RUNTIMES = ("docker", "podman")


def container_argv(
    runtime: str,
    alloc_id: int,
    image: str,
    command: Sequence[str],
    env: Mapping[str, str],
    *,
    identity: Identity | None = None,
    cpu_millis: int = 0,
    mem_mib: int = 0,
    pids_max: int = 4096,
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
    for key in sorted(env):
        check_env_name(key)
        argv += ["-e", f"{key}={env[key]}"]
    visible = env.get("NVIDIA_VISIBLE_DEVICES")
    if visible not in (None, "", "void"):
        argv += ["--gpus", f"device={visible}"]
    return [*argv, "--", image, *command]
