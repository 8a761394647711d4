"""The node agent's settings (``gpupool agent``'s options; ``gpupool up``'s embedded agents)."""

from dataclasses import dataclass, field
from pathlib import Path

from gpupool.agent.workloads import IsolationConfig

DEFAULT_LOG_MAX_BYTES = 64 * 1024 * 1024


@dataclass
class AgentConfig:
    server: str
    token: str
    name: str
    devices: str = "auto"
    state_dir: Path = Path("gpupool-agent")
    heartbeat_s: float | None = None  # None: as the server advises (5 s if it does not)
    sync_s: float = 1.0
    orders_wait_s: float = 25.0  # longest a request for new orders waits at the server
    channel: bool = True  # beats and orders over one WebSocket where the server offers it
    ca_file: str | None = None  # a CA file to trust for an HTTPS server (a site's own CA)
    # mutual TLS: the certificate (and key) this node presents, of the server's client CA
    cert_file: str | None = None
    key_file: str | None = None
    grace_s: float = 10.0
    cpu_millis: int | None = None
    memory_mib: int | None = None
    labels: dict[str, str] = field(default_factory=dict)
    pool: str = "default"
    hami_core: str | None = None  # libvgpu.so; found in the usual places when None
    stop_workloads_on_exit: bool = False  # embedded agents (gpupool up) stop theirs
    share: bool = False  # register whole cards as fractional-share devices
    isolation: IsolationConfig = field(default_factory=IsolationConfig)
    log_max_bytes: int = DEFAULT_LOG_MAX_BYTES  # a job's log kept on the server, per workload
    reserve_mem_mib: int | None = None  # kept from the pool for the system (None: 5%, 1-16 GiB)
