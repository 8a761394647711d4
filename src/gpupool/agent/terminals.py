"""Terminals in a job's sandbox: a process started where the job's workload runs — its
tenant's user, cgroups, network and mount namespaces, folder and environment (the slice's
variables included) — on a pseudo-terminal (a shell, ``gpupool srun --pty``) or on pipes
(``gpupool exec``).

The agent never forks into a namespace itself (it is threaded); it starts ``python -m
gpupool.agent.enter`` (``agent.enter``), a new session whose streams are the terminal's, and
hands it the workload's namespaces as open descriptors, taken from the workload's own first
process while it is the shim's child — so they are that job's, not whatever process took its
pid since. A terminal keeps the last ``RING`` bytes of its output for the next attach."""

import contextlib
import fcntl
import json
import os
import signal
import struct
import subprocess
import sys
import termios
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from gpupool.agent.processes import LaunchSpec, children, every_stat, shim_environment, stat_of
from gpupool.model.relay import RING

START_WAIT_S = 5.0  # a terminal opened as its job starts waits this long for its workload


class TerminalError(Exception):
    """The terminal cannot start; the reason goes to the person who asked."""


@dataclass
class EnterSpec:
    """What ``agent.enter`` does (its spec file, 0600 in the agent's state folder)."""

    command: list[str] | None
    env: dict[str, str]
    cwd: str
    uid: int | None = None
    gid: int | None = None
    cgroups: list[str] = field(default_factory=list)
    pty: bool = True
    netns_fd: int | None = None
    mntns_fd: int | None = None


@dataclass
class Where:
    """Where a job's workload runs on this node, read from its spec (``spec.json``)."""

    env: dict[str, str]
    cwd: str
    uid: int | None
    gid: int | None
    cgroups: list[str]
    netns: str | None  # its tenant's network namespace file (/run/netns/...)
    private_tmp: bool  # it has a mount namespace of its own (private /tmp)
    shim: int  # the shim's pid: the workload's first process is its child

    @classmethod
    def of(cls, folder: Path, shim_pid: int) -> "Where":
        spec = LaunchSpec.read(folder)
        box = spec.sandbox or {}
        return cls(
            env=dict(spec.env),
            cwd=spec.cwd,
            uid=spec.uid,
            gid=spec.gid,
            cgroups=list(spec.cgroups),
            netns=box.get("netns"),
            private_tmp=bool(box.get("private_tmp")),
            shim=shim_pid,
        )


def _parent(pid: int) -> int | None:
    fields = stat_of(pid)
    return None if fields is None else int(fields[1])


def _namespaces(where: Where) -> tuple[int | None, int | None]:
    """Open the workload's network and mount namespaces (descriptors the caller closes)."""
    net = mnt = None
    try:
        if where.netns:
            net = os.open(where.netns, os.O_RDONLY | os.O_CLOEXEC)
        if where.private_tmp:
            first = children(where.shim)
            deadline = time.monotonic() + START_WAIT_S
            while not first and time.monotonic() < deadline and _parent(where.shim) is not None:
                time.sleep(0.05)  # the shim is still starting it (its session's thread only)
                first = children(where.shim)
            if not first:
                raise TerminalError("the job's workload has not started or has ended")
            mnt = os.open(f"/proc/{first[0]}/ns/mnt", os.O_RDONLY | os.O_CLOEXEC)
            if _parent(first[0]) != where.shim:  # it ended meanwhile and its pid was taken
                raise TerminalError("the job's workload has ended")
    except OSError as exc:
        for fd in (net, mnt):
            if fd is not None:
                os.close(fd)
        raise TerminalError(f"cannot enter the job's sandbox: {exc.strerror or exc}") from None
    except TerminalError:
        for fd in (net, mnt):
            if fd is not None:
                os.close(fd)
        raise
    return net, mnt


def set_size(fd: int, cols: int, rows: int) -> None:
    with contextlib.suppress(OSError):
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


class Terminal:
    """One process in the sandbox: ``master`` (pseudo-terminal) or ``stdin``/``stdout``/
    ``stderr`` (pipes, the agent's ends), all non-blocking."""

    def __init__(self, number: int, proc: subprocess.Popen, pty: bool, master: int | None,
                 pipes: tuple[int, int, int] | None, spec: Path | None = None,
                 uid: int | None = None):  # fmt: skip
        self.number = number
        self.uid = uid  # its processes' user (None: the agent's own)
        self.spec = spec
        self.proc = proc
        self.pty = pty
        self.master = master
        self.stdin: int | None = pipes[0] if pipes else None
        self.stdout: int | None = pipes[1] if pipes else None
        self.stderr: int | None = pipes[2] if pipes else None
        self.ring = bytearray()  # its last output (a pseudo-terminal's), for the next attach
        self.stream: int | None = None  # the stream it is attached to
        self.exit_code: int | None = None
        self.started_at = time.time()
        self.ended_at: float | None = None
        self.out_open = True  # its output can still be read
        self.err_open = pipes is not None

    @property
    def ended(self) -> bool:
        return self.exit_code is not None and not self.out_open and not self.err_open

    def keep(self, data: bytes) -> None:
        if not self.pty:
            return
        self.ring += data
        if len(self.ring) > RING:
            del self.ring[: len(self.ring) - RING]

    def outputs(self) -> list[tuple[int, int]]:
        """(descriptor, channel) to read while open."""
        out = []
        first = self.master if self.pty else self.stdout
        if self.out_open and first is not None:
            out.append((first, 0))
        if self.err_open and self.stderr is not None:
            out.append((self.stderr, 1))
        return out

    def input_fd(self) -> int | None:
        return self.master if self.pty else self.stdin

    def resize(self, cols: int, rows: int) -> None:
        if self.master is not None:
            set_size(self.master, cols, rows)

    def signal(self, sig: int) -> None:
        """To its process group (a pseudo-terminal's foreground job gets Ctrl-C as a byte);
        only while its first process lives (unreaped, its number is its own)."""
        if self.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, sig)

    def close_input(self) -> None:
        if not self.pty and self.stdin is not None:
            with contextlib.suppress(OSError):
                os.close(self.stdin)
            self.stdin = None

    def reap(self) -> bool:
        """Whether the process has exited (its code kept)."""
        if self.exit_code is None:
            code = self.proc.poll()
            if code is None:
                return False
            self.exit_code = code if code >= 0 else 128 - code
            self.ended_at = time.time()
        return True

    def hang_up(self) -> None:
        """Its session ends: SIGHUP to everything it started (its session), SIGKILL after."""
        for pid in session_members(self.proc.pid, self.uid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGHUP)
                os.kill(pid, signal.SIGCONT)

    def kill(self) -> None:
        for pid in session_members(self.proc.pid, self.uid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)

    def close(self) -> None:
        for fd in (self.master, self.stdin, self.stdout, self.stderr):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self.master = self.stdin = self.stdout = self.stderr = None
        self.out_open = self.err_open = False
        if self.spec is not None:
            with contextlib.suppress(OSError):
                self.spec.unlink()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=0)


def session_members(sid: int, uid: int | None = None) -> list[int]:
    """Every live process of the session ``sid`` (a terminal's: bash puts each job in a
    process group of its own, but all stay in its session), of user ``uid`` when given (a
    session whose processes all ended frees its number: a later session of that number is
    someone else's)."""
    return [
        pid
        for pid, fields in every_stat()
        if fields[0] not in ("Z", "X")
        and int(fields[3]) == sid
        and (uid is None or _real_uid(Path(f"/proc/{pid}")) == uid)
    ]


def _real_uid(proc: Path) -> int | None:
    """A process's real user (``/proc/PID/status``: its folder's owner changes with
    ``PR_SET_DUMPABLE``)."""
    try:
        for line in (proc / "status").read_text().splitlines():
            if line.startswith("Uid:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return None


def _nonblocking(*fds: int) -> None:
    for fd in fds:
        os.set_blocking(fd, False)


def spawn(
    where: Where,
    folder: Path,
    number: int,
    command: list[str] | None,
    *,
    pty: bool,
    cols: int = 80,
    rows: int = 24,
    term: str = "xterm-256color",
) -> Terminal:
    """Start terminal ``number`` of the session whose workload's state folder is ``folder``
    (its spec file stays there until the terminal is closed)."""
    net, mnt = _namespaces(where)
    env = {**where.env, "GPUPOOL_TERMINAL": str(number)}
    if pty:
        env["TERM"] = term
    spec = EnterSpec(command, env, where.cwd, where.uid, where.gid, where.cgroups, pty, net, mnt)
    path = spec_path(folder, number)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(asdict(spec), f)
    argv = [sys.executable, "-m", "gpupool.agent.enter", str(path)]
    keep = tuple(fd for fd in (net, mnt) if fd is not None)
    theirs: list[int] = []  # the child's ends, closed here once it has them
    mine: list[int] = []
    try:
        if pty:
            master, slave = os.openpty()
            mine, theirs = [master], [slave]
            set_size(slave, cols, rows)
            if where.uid is not None:  # the user's own terminal, as a login gives it
                os.fchown(slave, where.uid, where.gid if where.gid is not None else -1)
            os.fchmod(slave, 0o600)
            streams = (slave, slave, slave)
        else:
            (in_r, in_w), (out_r, out_w), (err_r, err_w) = os.pipe(), os.pipe(), os.pipe()
            mine, theirs = [in_w, out_r, err_r], [in_r, out_w, err_w]
            streams = (in_r, out_w, err_w)
        proc = subprocess.Popen(
            argv, stdin=streams[0], stdout=streams[1], stderr=streams[2],
            env=shim_environment(), cwd=folder, start_new_session=True, pass_fds=keep,
        )  # fmt: skip
    except OSError as exc:
        for fd in mine:
            os.close(fd)
        with contextlib.suppress(OSError):
            path.unlink()
        raise TerminalError(f"cannot start a terminal: {exc.strerror or exc}") from None
    finally:
        for fd in (*theirs, *keep):
            os.close(fd)
    _nonblocking(*mine)
    if pty:
        return Terminal(number, proc, True, mine[0], None, path, where.uid)
    return Terminal(number, proc, False, None, (mine[0], mine[1], mine[2]), path, where.uid)


def spec_path(folder: Path, number: int) -> Path:
    return folder / f"terminal-{number}.json"
