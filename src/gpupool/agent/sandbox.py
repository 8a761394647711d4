"""What a workload's first process enters before it runs as its tenant's user: its tenant's
network namespace on this node (loopback and abstract UNIX sockets private to the tenant) and
a mount namespace of its own with a private ``/tmp`` and ``/dev/shm`` (tmpfs, like systemd's
``PrivateTmp``: nothing written there outlives the workload, nothing of another's is seen).

Called by the shim in the child between fork and exec (``preexec_fn``), as root, which is why
the child drops to the tenant's user here rather than through ``Popen(user=...)``: Python
switches user before ``preexec_fn`` runs, and namespaces need root. The shim itself stays in
the host's namespaces (it reads the lease and writes the exit note there).
"""

import ctypes
import os
from dataclasses import dataclass, field

CLONE_NEWNS = 0x00020000
CLONE_NEWNET = 0x40000000
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_BIND = 0x1000
MS_REC = 0x4000
MS_PRIVATE = 1 << 18
PRIVATE_DIRS = ("/tmp", "/dev/shm", "/var/tmp", "/run/lock")  # all writable by everyone

_libc = ctypes.CDLL(None, use_errno=True)


@dataclass
class Sandbox:
    """``netns``: a network namespace file to join (``/run/netns/NAME``) or None;
    ``private_tmp``: tmpfs on /tmp and /dev/shm of ``tmp_mib`` each; ``keep``: folders under
    those that must stay visible at their path (the workload's own working folder)."""

    netns: str | None = None
    private_tmp: bool = False
    tmp_mib: int = 0
    keep: list[str] = field(default_factory=list)


def _check(ret: int, what: str) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def _mount(source: str | None, target: str, fstype: str | None, flags: int, data: str) -> None:
    enc = lambda s: s.encode() if s is not None else None  # noqa: E731
    ret = _libc.mount(enc(source), target.encode(), enc(fstype), flags, enc(data) if data else None)
    _check(ret, f"mount {target}")


def _under(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def enter(box: Sandbox) -> None:
    """Join the tenant's network namespace and make the private folders (root only)."""
    if box.netns:
        fd = os.open(box.netns, os.O_RDONLY | os.O_CLOEXEC)
        try:
            _check(_libc.setns(fd, CLONE_NEWNET), f"setns {box.netns}")
        finally:
            os.close(fd)
    if not box.private_tmp:
        return
    _check(_libc.unshare(CLONE_NEWNS), "unshare mount namespace")
    _mount(None, "/", None, MS_REC | MS_PRIVATE, "")  # nothing we mount leaks to the host
    # opened in the new namespace (a bind mount's source must be one of its own mounts)
    kept = [
        (path, os.open(path, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC))
        for path in box.keep
        if any(_under(path, d) for d in PRIVATE_DIRS)
    ]
    size = f"size={box.tmp_mib}m," if box.tmp_mib > 0 else ""
    for folder in PRIVATE_DIRS:
        if os.path.isdir(folder):
            _mount("tmpfs", folder, "tmpfs", MS_NOSUID | MS_NODEV, f"{size}mode=1777")
    for path, fd in kept:  # the working folder, where a test or an operator put it under /tmp
        os.makedirs(path, mode=0o755, exist_ok=True)
        _mount(f"/proc/self/fd/{fd}", path, None, MS_BIND, "")
        os.close(fd)


def become(uid: int | None, gid: int | None, umask: int | None) -> None:
    """Drop to the tenant's user for good (no supplementary groups)."""
    if uid is None:
        return
    if gid is None:  # never run a tenant's work with root's group
        raise ValueError(f"user {uid} has no group to drop to")
    os.setgroups([])
    os.setresgid(gid, gid, gid)
    os.setresuid(uid, uid, uid)
    if umask is not None:
        os.umask(umask)
