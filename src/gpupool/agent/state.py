"""What the agent remembers across restarts: one directory per allocation it started, holding
``record.json`` (ids, generation, the shim's pid and start time, log offsets, why it is being
stopped) next to the workload's ``stdout``, ``stderr`` and ``exit`` files."""

import fcntl
import json
import os
import shutil
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

from gpupool.model.errors import SpecError


@dataclass
class Record:
    alloc_id: int
    job_id: int
    generation: int
    pid: int  # the shim's pid, also the workload's process-group id
    ticks: int  # the shim's start time, so a reused pid is not mistaken for it
    started_at: float
    max_runtime_s: int | None = None
    limits_mib: dict[str, int] = field(default_factory=dict)  # device UUID -> granted MiB
    load: dict[int, float] = field(default_factory=dict)  # device index -> share of it
    stop_reason: str = ""  # why the agent stops it (watchdog, max runtime, released)
    stop_sent_at: float | None = None
    killed: bool = False
    released: bool = False  # the server no longer wants it: nothing left to report
    shutdown: bool = False  # stopped because its agent shut down: reported lost, not failed
    offsets: dict[str, int] = field(default_factory=lambda: {"stdout": 0, "stderr": 0})
    log_bytes: int = 0  # output uploaded so far (both streams), against the log limit
    log_truncated: bool = False  # the limit was reached and the log says so
    workdir: str = ""  # the workload's own working directory (removed when it ends)
    cgroups: list[str] = field(default_factory=list)
    mps: list[str] = field(default_factory=list)  # GPUs whose MPS daemon it uses
    mem_mib: int = 0  # its host-memory grant (named when the OOM killer stops it)
    outputs: dict | None = None  # gpupool.agent.job_output.OutputPlan's fields
    output_note: str = ""  # why its --output / --error could not be written (its reason too)
    port: int | None = None  # a service replica's port (gpupool.agent.replica_ports)
    control: str | None = None  # where its agent reaches its control endpoints (host:port)
    disk_mib: int | None = None  # its working folder's limit (None: an older agent's record)
    checkpoint: dict | None = None  # it saves on a signal (gpupool.model.checkpoint's JSON)
    warned: bool = False  # its signal was sent before its time limit
    asleep: bool = False  # a parked replica whose engine confirmed its sleep
    sleep_changed_at: float = 0.0  # when the agent last put it to sleep or woke it
    wake_faults: int = 0  # times its engine was found awake while parked
    checkpointed_at: float | None = None  # its job's checkpoint file's time, passed on
    tenant: str = ""  # whose (its chores queue with its tenant's: agent.harvest)
    start_reported: bool = True  # the server heard it started (False: say it again)
    interactive: str = ""  # a session ("shell"): its link to the server (agent.sessions)


class StateLocked(SpecError):
    """Another agent holds this state dir."""


class Store:
    def __init__(self, root: Path):
        # absolute: the shim writes its exit file by this path. The agent's user only (0700):
        # records, specs with jobs' environments, and logs are no workload's business
        base = root.resolve()
        base.mkdir(parents=True, exist_ok=True)
        base.chmod(0o700)
        self.root = base / "workloads"
        self.root.mkdir(mode=0o700, exist_ok=True)
        self.root.chmod(0o700)
        self.lease = base / "lease"
        self._lock: int | None = None

    def instance(self) -> str:
        """Who this agent is to the server: an id kept in the state dir, and this boot of the
        host (a copy of the state dir on another host, or a second agent, is another one)."""
        path = self.root.parent / "instance"
        try:
            own = path.read_text().strip()
        except OSError:
            own = ""
        if not own:
            own = uuid.uuid4().hex[:16]
            path.write_text(own + "\n")
        try:
            boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()[:8]
        except OSError:
            boot = "noboot"
        return f"{own}:{boot}"

    def lock(self) -> None:
        """Hold the state dir for this agent's life: a second agent on it would adopt and
        stop the first one's workloads. Raises ``StateLocked``."""
        if self._lock is not None:
            return
        fd = os.open(self.root.parent / "agent.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            raise StateLocked(
                f"state dir {self.root.parent} is in use by another agent (one agent per "
                "state dir; give this one its own --state-dir)"
            ) from None
        self._lock = fd

    def unlock(self) -> None:
        fd, self._lock = self._lock, None
        if fd is not None:
            os.close(fd)

    def dir(self, alloc_id: int) -> Path:
        return self.root / str(alloc_id)

    def save(self, rec: Record) -> None:
        path = self.dir(rec.alloc_id) / "record.json"
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(rec)))
        os.replace(tmp, path)

    def load_all(self) -> dict[int, Record]:
        out = {}
        for path in sorted(self.root.glob("*/record.json")):
            try:
                data = json.loads(path.read_text())
                data["load"] = {int(k): v for k, v in data.get("load", {}).items()}
                rec = Record(**data)
            except (OSError, ValueError, TypeError):
                continue  # a record cut short by a crash before its process was started
            out[rec.alloc_id] = rec
        return out

    def remove(self, alloc_id: int) -> None:
        shutil.rmtree(self.dir(alloc_id), ignore_errors=True)
