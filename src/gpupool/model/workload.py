"""What a job runs: its command, environment and container image, checked before anything is
stored or started. Pure: the API refuses a bad spec with the field (422) and the agent checks
again before it starts one (an order from an older server, a row written by hand), so no
user string can crash an agent or become a flag of the container runtime.

Bounds: every string is free of NUL bytes (the kernel cannot pass them); an environment name
is POSIX (``[A-Za-z_][A-Za-z0-9_]*``); command and environment together take at most
``MAX_ARGV_ENV_BYTES`` (128 KiB, counted as ``execve`` counts them: each string plus its NUL,
``NAME=value`` per variable) — a sixteenth of Linux's usual ``ARG_MAX`` of 2 MiB and at most the
kernel's limit of 128 KiB for one string; an image is an OCI reference (never a flag).
"""

import re
from collections.abc import Mapping, Sequence

from gpupool.model.errors import SpecError

MAX_ARGV_ENV_BYTES = 128 * 1024
MAX_ENV_VARS = 512
MAX_COMMAND_ARGS = 4096
MAX_IMAGE_LENGTH = 255  # the reference library's limit on a repository name
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# The OCI distribution reference grammar (github.com/distribution/reference):
#   reference := name [":" tag] ["@" digest];  name := [domain "/"] path-component ["/" ...]
_ALNUM = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|[-]+)"
_PATH_COMPONENT = rf"{_ALNUM}(?:{_SEPARATOR}{_ALNUM})*"
_DOMAIN_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_DOMAIN = rf"(?:{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*|\[[0-9A-Fa-f:]+\])(?::[0-9]+)?"
_TAG = r"[\w][\w.-]{0,127}"
_DIGEST = r"[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}"
IMAGE_REFERENCE = re.compile(
    rf"(?P<name>(?:{_DOMAIN}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*)"
    rf"(?::(?P<tag>{_TAG}))?(?:@(?P<digest>{_DIGEST}))?"
)


def check_text(value: str, field: str) -> None:
    if "\x00" in value:
        raise SpecError(f"{field}: must not contain a NUL byte", field=field)


def check_env_name(name: str, field: str = "env") -> None:
    if not ENV_NAME.fullmatch(name):
        shown = name if len(name) <= 60 else name[:57] + "..."
        raise SpecError(
            f"{field}: environment name {shown!r} is invalid (letters, digits and _, "
            "not starting with a digit)",
            field=field,
        )


def check_image(image: str) -> None:
    """An OCI image reference (``registry:5000/team/pytorch:2.3``, ``name@sha256:...``)."""
    check_text(image, "image")
    if image.startswith("-"):
        raise SpecError(f"image: {image[:60]!r} starts with '-' (not an image name)", field="image")
    match = IMAGE_REFERENCE.fullmatch(image)
    if match is None:
        raise SpecError(
            f"image: {image[:60]!r} is not an image reference ([registry/]name[:tag][@digest], "
            "lower-case name)",
            field="image",
        )
    if len(match["name"]) > MAX_IMAGE_LENGTH:
        raise SpecError(f"image: name longer than {MAX_IMAGE_LENGTH} characters", field="image")


def argv_env_bytes(command: Sequence[str], env: Mapping[str, str]) -> int:
    """Bytes ``execve`` needs for these strings: each argument and ``NAME=value`` plus NUL."""
    size = sum(len(a.encode()) + 1 for a in command)
    return size + sum(len(k.encode()) + len(v.encode()) + 2 for k, v in env.items())


def check_workload(command: Sequence[str], env: Mapping[str, str], image: str | None) -> None:
    """Raise ``SpecError`` naming the field for anything the kernel or the container runtime
    would refuse or misread."""
    if len(command) > MAX_COMMAND_ARGS:
        raise SpecError(f"command: more than {MAX_COMMAND_ARGS} arguments", field="command")
    for i, arg in enumerate(command):
        check_text(arg, f"command[{i}]")
    if len(env) > MAX_ENV_VARS:
        raise SpecError(f"env: more than {MAX_ENV_VARS} variables", field="env")
    for name, value in env.items():
        check_env_name(name)
        check_text(value, f"env.{name}")
        if name.startswith(GRANTED_PREFIXES):
            raise SpecError(
                f"env.{name}: set by gpupool from the job's grant (an MPS daemon's pipe is the "
                "node's to hand out, never a job's to choose)",
                field=f"env.{name}",
            )
    size = argv_env_bytes(command, env)
    if size > MAX_ARGV_ENV_BYTES:
        raise SpecError(
            f"command: command and env take {size} bytes, more than the {MAX_ARGV_ENV_BYTES} "
            "allowed",
            field="command",
        )
    if image is not None:
        check_image(image)
        for name, value in env.items():
            check_container_env_name(name)
            if "\n" in value or "\r" in value:
                raise SpecError(
                    f"env.{name}: an image job's variable must be one line (it is passed to "
                    "the container in an env file)",
                    field=f"env.{name}",
                )


# what the agent sets from a grant, which a job's own value must never steer: an MPS pipe
# directory of the job's choosing reaches a daemon, and through it a card, of another grant
GRANTED_PREFIXES = ("CUDA_MPS_",)

# Names a container runtime's client (docker, podman) or the dynamic loader read from their
# own environment. A job's variables never reach the root-run client's environment (they go
# into the container as ``-e``), but an image job naming one of these is refused anyway: the
# job would expect it to steer the runtime, and a slip in one place must not be root on a node.
RUNTIME_ENV_NAMES = frozenset({"PATH", "HOME", "CONTAINER_HOST", "REGISTRY_AUTH_FILE"})
RUNTIME_ENV_PREFIXES = ("LD_", "DOCKER_", "PODMAN_", "CONTAINERS_", "XDG_")


def check_container_env_name(name: str) -> None:
    """Refuse a variable that would steer the container runtime's client (see above)."""
    if name in RUNTIME_ENV_NAMES or name.startswith(RUNTIME_ENV_PREFIXES):
        raise SpecError(
            f"env.{name}: an image job may not set {name!r} (it steers the container "
            "runtime or the loader on the node; set it in the image instead)",
            field=f"env.{name}",
        )
