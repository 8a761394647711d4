"""``python -m gpupool.agent.enter SPEC``: put one terminal's process where its job's workload
runs, then run the command there (``nsenter`` and ``setpriv`` in one, for gpupool's shells).

Started by the agent (``agent.terminals``) as its own user — root on a real node — in a new
session, its standard streams the terminal's (a pseudo-terminal's slave, or pipes), the
namespaces of the workload passed as open descriptors. In order: take the terminal as its
controlling one, join the workload's cgroups, enter its network and mount namespaces (its
tenant's network, its private ``/tmp``), obey the stop signals again, raise its OOM score,
forbid user namespaces, drop to the tenant's user for good, enter the workload's folder, and
only then look the command up and run it — with the environment of the workload, as that
user: nothing the tenant typed reaches a root process's environment, program lookup or paths.

The spec (``agent.terminals.EnterSpec``'s fields, JSON) lies in the agent's state folder
(0700): no workload can read or change it. This module runs single-threaded, so entering a
mount namespace is allowed (it is not in a threaded process such as the agent)."""

import ctypes
import fcntl
import json
import os
import signal
import sys
import termios

from gpupool.agent import cgroups, no_userns, oom
from gpupool.agent.sandbox import CLONE_NEWNET, CLONE_NEWNS, become

CANNOT_START = 127
_libc = ctypes.CDLL(None, use_errno=True)


def _setns(fd: int, kind: int, what: str) -> None:
    if _libc.setns(fd, kind) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"cannot enter the workload's {what} namespace: {os.strerror(err)}")


def enter(spec: dict) -> None:
    """Everything before the exec; raises OSError with a reason to print."""
    if spec.get("pty"):
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)  # the terminal becomes this session's
    cgroups.join(list(spec.get("cgroups") or []), os.getpid())
    if spec.get("netns_fd") is not None:
        _setns(int(spec["netns_fd"]), CLONE_NEWNET, "network")
    if spec.get("mntns_fd") is not None:
        _setns(int(spec["mntns_fd"]), CLONE_NEWNS, "mount")
    for fd in (spec.get("netns_fd"), spec.get("mntns_fd")):
        if fd is not None:
            os.close(int(fd))
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGPIPE):
        signal.signal(sig, signal.SIG_DFL)
    oom.as_workload()
    no_userns.deny()
    uid, gid = spec.get("uid"), spec.get("gid")
    if uid is not None:
        become(int(uid), None if gid is None else int(gid), 0o077)


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m gpupool.agent.enter SPEC", file=sys.stderr)
        return 2
    with open(argv[0]) as f:
        spec = json.load(f)
    try:
        enter(spec)
    except OSError as exc:
        print(f"gpupool: {exc.strerror or exc}", file=sys.stderr, flush=True)
        return CANNOT_START
    env = {str(k): str(v) for k, v in (spec.get("env") or {}).items()}
    for folder in (spec.get("cwd"), env.get("HOME"), "/"):  # as the user now
        try:
            if folder:
                os.chdir(folder)
                break
        except OSError:
            continue
    given = spec.get("command")
    # no command: the user's shell, bash where the node has it
    choices = [[str(a) for a in given]] if given else [["bash"], ["sh"]]
    error: OSError | None = None
    for command in choices:
        try:
            os.execvpe(command[0], command, env)  # looked up with the job's PATH, as its user
        except OSError as exc:
            error = exc
    assert error is not None
    print(f"gpupool: cannot run {choices[0][0]!r}: {error.strerror or error}", file=sys.stderr)
    return CANNOT_START


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
