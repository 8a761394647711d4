"""Which TCP ports a process listens on, read from /proc (no capture, no extra tool)."""

import os
from pathlib import Path

LISTEN = "0A"


def _listening_inodes() -> dict[str, int]:
    """socket inode -> port, for every listening TCP socket (IPv4 and IPv6)."""
    out: dict[str, int] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[3] == LISTEN:
                out[fields[9]] = int(fields[1].rsplit(":", 1)[1], 16)
    return out


def listening_ports(pid: int) -> set[int]:
    """The TCP ports ``pid`` holds a listening socket on."""
    inodes = _listening_inodes()
    ports = set()
    fd_dir = Path(f"/proc/{pid}/fd")
    for fd in os.listdir(fd_dir):
        try:
            target = os.readlink(fd_dir / fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inode = target[len("socket:[") : -1]
            if inode in inodes:
                ports.add(inodes[inode])
    return ports
