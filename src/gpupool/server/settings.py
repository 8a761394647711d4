"""One settings object for the server (DESIGN.md invariant 7): ``GPUPOOL_`` environment
variables, an optional TOML or YAML file, then explicit overrides from the command line."""

import ipaddress
from pathlib import Path
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
    YamlConfigSettingsSource,
)

from gpupool.model import SpecError
from gpupool.scheduler.placer import POLICY_NAMES


class Settings(BaseSettings):
    """Server configuration. ``database_url`` empty means SQLite at ``DATA_DIR/gpupool.db``."""

    model_config = SettingsConfigDict(env_prefix="GPUPOOL_", extra="forbid")

    data_dir: Path = Path("data")
    database_url: str = ""
    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535)
    # HTTPS: the certificate (with its chain) and its private key, PEM files; without them the
    # server speaks plain HTTP, and warns when it listens beyond loopback (tokens in clear)
    tls_cert_file: Path | None = None
    tls_key_file: Path | None = None
    # mutual TLS: agents must present a certificate of this CA naming their node (people and
    # the CLI are not asked); needs tls_cert_file
    tls_client_ca_file: Path | None = None
    # plain HTTP beyond loopback is refused (tokens in clear) unless allowed: behind a TLS proxy
    # on the same host or a private network an operator vouches for
    allow_plain_http: bool = False
    # who issues the invoices, printed at their top (a company, a department: "AI 平台部")
    invoice_issuer: str = Field("", max_length=200)
    policy: str = "auto"
    cycle_interval_s: float = Field(2.0, gt=0, le=300)  # at least this often
    cycle_min_gap_s: float = Field(0.05, ge=0, le=10)  # at most this often
    grace_s: int = Field(30, ge=0)
    # a job that saves on a signal (its ``checkpoint``) is killed this long after it, when it
    # declares no grace of its own; and may declare at most the second (a long grace would
    # hold a card a service needs: the vacate is to take seconds)
    checkpoint_grace_s: int = Field(5, ge=1, le=3600)
    checkpoint_grace_max_s: int = Field(30, ge=1, le=3600)
    # victims of one priority: "work", the least work lost (cards x seconds since the last
    # checkpoint), or "age", the fewest seconds since it whatever they hold (quotas-and-cycle.md)
    victim_order: Literal["work", "age"] = "work"
    # live allocations are metered in closed intervals ending on these boundaries (UTC), so
    # a billing month closes while jobs run
    metering_interval_s: int = Field(3600, ge=1, le=86400)
    billing_zone: str = "Asia/Shanghai"  # budgets' months
    # alerts: how often they are evaluated, their limits, and where they are delivered
    alert_interval_s: float = Field(10.0, gt=0, le=3600)
    alert_pending_minutes: float = Field(30.0, gt=0)
    alert_temp_c: float = Field(85.0, gt=0, le=200)
    alert_idle_minutes: float = Field(10.0, gt=0)
    alert_webhook_url: str = ""
    alert_webhook_secret: str = ""
    # defragmentation: a job within its tenant's guarantee that waited this long while the
    # cards it needs are free but scattered gets room by moving jobs that allow it
    defrag_after_s: float = Field(300.0, ge=0, le=86400 * 30)
    defrag_moves_per_hour: int = Field(12, ge=0, le=10000)  # 0: never move jobs
    # a move may cost a job at most this much work (it checkpoints at least this often); a
    # plan runs only when the waiting job's cards x time waited exceed what the moves cost
    defrag_checkpoint_s: float = Field(1800.0, ge=0, le=86400 * 7)
    # jobs of this priority class or above are defragmented for beyond their guarantee too
    # (moving only their own tenant's jobs or borrowed ones); empty: guarantees only
    defrag_class: str = Field("", max_length=100)
    # hybrid pools: a card ordered into another mode that its agent has not switched by then
    # takes work again as it is (an agent that cannot or does not answer)
    mode_switch_timeout_s: float = Field(600.0, gt=0, le=86400)
    sample_interval_s: float = Field(60.0, gt=0, le=3600)  # the dashboard's history
    # services: how often the leader health-checks replicas and scales (the KPA's tick), how
    # long a check may take, how many of one tenant's checks run at once (its slow replicas
    # delay only its own), how long a replica scaled in may finish its requests, how many
    # failed checks in a row make a ready replica replaced, and how replacements of replicas
    # that keep failing back off (doubling from the first delay up to the last)
    service_interval_s: float = Field(2.0, gt=0, le=300)
    service_probe_timeout_s: float = Field(1.0, gt=0, le=30)
    service_probes_per_tenant: int = Field(4, ge=1, le=64)
    service_drain_s: float = Field(10.0, ge=0, le=3600)
    service_failures: int = Field(3, ge=1, le=100)
    service_backoff_s: float = Field(2.0, ge=0, le=3600)
    service_backoff_max_s: float = Field(300.0, ge=0, le=86400)
    # the share of a service's minutes that may violate its SLO: the SLO feedback
    # (autoscale.slo_feedback) raises its headroom on a violating minute, lowers it back
    # towards the declared one while this budget is unspent
    service_slo_budget: float = Field(0.01, gt=0, le=0.5)
    session_hours: float = Field(12.0, gt=0, le=24 * 30)  # a dashboard login lasts this long
    # idle culling of interactive sessions (docs/interactive.md): the idle timeout of a
    # tenant whose tree sets none (0: off, an allocation is held to its time limit as
    # salloc's is), the warning before a release, how often the leader looks, and how often
    # one session's terminal input is written down at most (its first keystroke after a
    # quiet stretch at once)
    session_idle_timeout_s: int = Field(0, ge=0, le=366 * 86400)
    session_idle_warning_s: int = Field(600, ge=0, le=366 * 86400)
    session_idle_check_s: float = Field(15.0, gt=0, le=3600)
    session_input_stamp_s: float = Field(10.0, ge=0, le=3600)
    # admission limits of every tenant that has none of its own (gpupool tenant limits):
    # jobs pending, held or running; tasks in one array; services; the replicas its services
    # may run together (their max_replicas); MiB of job logs the server keeps for it. Logs
    # of jobs that ended more than log_retention_days ago are deleted, and the oldest jobs'
    # logs beyond a tenant's limit
    tenant_max_jobs: int = Field(10_000, ge=1, le=10_000_000)
    tenant_max_array: int = Field(10_000, ge=1, le=1_000_000)
    tenant_max_services: int = Field(20, ge=0, le=100_000)
    tenant_max_replicas: int = Field(100, ge=0, le=1_000_000)
    tenant_max_log_mib: int = Field(1024, ge=1, le=10_000_000)
    log_retention_days: float = Field(30.0, gt=0, le=3650)
    # a guarantee set above what its parent guarantees, or top-level guarantees above the
    # pool: answered with a warning naming the numbers, or refused (server.overbooking)
    quota_overbooking: Literal["warn", "refuse"] = "warn"
    # fair share over time (docs/fair-share-and-estimates.md): borrowed card-hours are aged
    # with this half-life and order who borrows next and, by fairshare_weight priority
    # points, jobs within a class (Slurm's PriorityDecayHalfLife, PriorityWeightFairshare);
    # 0: off — the static weights of today (Slurm's default half-life is 168 h)
    fairshare_half_life_h: float = Field(0.0, ge=0, le=24 * 365)
    fairshare_weight: int = Field(10_000, ge=0, le=10**6)
    # minimum run time before a job may be stopped for another (preemption, reclaim,
    # defragmentation), seconds per priority class and per tenant (a tenant's holds for its
    # sub-teams unless they set their own); a guarantee that waited min_runtime_bound_s may
    # stop protected jobs when nothing else frees the cards (Slurm's PreemptExemptTime)
    min_runtime_s: dict[str, float] = Field(default_factory=dict, max_length=1000)
    min_runtime_tenant_s: dict[str, float] = Field(default_factory=dict, max_length=100_000)
    min_runtime_bound_s: float = Field(600.0, ge=0, le=86400 * 30)
    # start-time estimates: the leader plans every estimate_interval_s (0: never), spending at
    # most estimate_budget_s (wall clock) on a plan (jobs past it get no estimate)
    estimate_interval_s: float = Field(30.0, ge=0, le=86400)
    estimate_budget_s: float = Field(2.0, gt=0, le=120)
    leader_poll_s: float = Field(1.0, gt=0, le=10)
    # /healthz of a server that runs the scheduler answers 503 once no scheduler has led for
    # this long (its leader writes a proof of life every few seconds)
    health_no_leader_s: float = Field(60.0, gt=0, le=3600)
    # agents may wait this long for new orders in one request (0: answer at once, as servers
    # before long-polling did); changes are looked for every orders_change_poll_s (SQLite),
    # or on PostgreSQL when a commit notifies, at most that often
    orders_max_wait_s: float = Field(25.0, ge=0, le=300)
    orders_change_poll_s: float = Field(0.2, gt=0, le=10)
    # a node silent this long is lost: its jobs are requeued (or failed, per job) — five
    # minutes, as Slurm's SlurmdTimeout and Kubernetes' eviction: a control-plane outage or a
    # partition shorter than its lease (290 s) kills no work; unless at
    # least mass_silence_fraction of the nodes (3 or more) are silent at once: then none is
    # (a network or control-plane failure, Kubernetes' zone rule; above 1: off)
    heartbeat_timeout_s: float = Field(300.0, gt=0, le=86400 * 365)
    # a node whose agent has been busy in one round of its loop longer than this (its beats
    # say so) takes no new work until it catches up: it could not start it
    agent_lag_max_s: float = Field(20.0, gt=0, le=3600)
    mass_silence_fraction: float = Field(0.55, gt=0, le=2)
    # agents stop their workloads (self-fencing) once silent for heartbeat_timeout_s minus
    # this margin, so a requeued job never overlaps its orphan; default min(10, timeout / 3)
    lease_margin_s: float | None = Field(None, gt=0, le=86400)
    # the heartbeat interval the server advises its agents (those not told one by their own
    # configuration); default: half the lease, at most 10 s. Heartbeats are most of a pool's
    # idle load (1,000 agents at 5 s: 200 requests/s)
    agent_heartbeat_s: float | None = Field(None, gt=0, le=3600)
    # agents may keep one WebSocket open (/api/v1/nodes/{name}/channel) for bare beats and
    # pushed orders instead of a request per heartbeat and per long poll; bare beats are
    # written together every agent_beat_flush_s
    agent_channel: bool = True
    agent_beat_flush_s: float = Field(1.0, gt=0, le=5)
    # advisory mode: how long a proposal waits for a decision (and a rejection holds its job)
    proposal_ttl_s: float = Field(3600.0, gt=0, le=7 * 86400)
    # /metrics: "token" (a bearer token of role metrics or admin) or "loopback" (no token,
    # but only from 127.0.0.1 / ::1)
    metrics_access: Literal["token", "loopback"] = "token"
    # failed authentications from one address within the window before it gets 429 (0: off)
    auth_failure_limit: int = Field(10, ge=0, le=10**6)
    auth_failure_window_s: float = Field(60.0, gt=0, le=86400)
    # addresses or networks of reverse proxies whose X-Forwarded-For / -Proto are believed
    trusted_proxies: list[str] = Field(default_factory=list, max_length=64)
    log_level: str = "info"
    log_json: bool = True

    @field_validator("policy")
    @classmethod
    def _known_policy(cls, value: str) -> str:
        if value not in POLICY_NAMES:
            raise ValueError(f"policy must be one of {', '.join(POLICY_NAMES)}")
        return value

    @field_validator("min_runtime_s", "min_runtime_tenant_s")
    @classmethod
    def _seconds(cls, value: dict[str, float]) -> dict[str, float]:
        for name, seconds in value.items():
            if not 0 <= seconds <= 86400 * 30:
                raise ValueError(f"{name}: {seconds:g} s is not between 0 and 30 days")
        return value

    @field_validator("trusted_proxies")
    @classmethod
    def _networks(cls, value: list[str]) -> list[str]:
        for entry in value:
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError:
                raise ValueError(
                    f"trusted_proxies: {entry!r} is not an address or network"
                ) from None
        return value

    @model_validator(mode="after")
    def _lease_times_fit(self) -> "Settings":
        timeout, warning = self.session_idle_timeout_s, self.session_idle_warning_s
        if timeout and warning >= timeout:
            raise ValueError(
                f"session_idle_warning_s ({warning}) must be below session_idle_timeout_s "
                f"({timeout})"
            )
        if self.lease_margin_s is not None and self.lease_margin_s >= self.heartbeat_timeout_s:
            raise ValueError("lease_margin_s must be below heartbeat_timeout_s")
        if self.agent_heartbeat_s is not None and self.agent_heartbeat_s > self.lease_s / 2:
            raise ValueError(
                f"agent_heartbeat_s must be at most half the agents' lease ({self.lease_s / 2:g}"
                " s): a lease must survive one lost heartbeat"
            )
        return self

    @property
    def heartbeat_advice_s(self) -> float:
        """The heartbeat interval advised to agents: two chances to renew each lease."""
        if self.agent_heartbeat_s is not None:
            return self.agent_heartbeat_s
        return min(10.0, self.lease_s / 2)

    @property
    def margin_s(self) -> float:
        if self.lease_margin_s is not None:
            return self.lease_margin_s
        return min(10.0, self.heartbeat_timeout_s / 3)

    @property
    def beat_flush_s(self) -> float:
        """How long bare beats wait to be written together: ``agent_beat_flush_s``, at most a
        tenth of the lease (a beat's answer renews the lease only once it comes)."""
        return min(self.agent_beat_flush_s, self.lease_s / 10)

    @property
    def lease_s(self) -> float:
        """How long an agent's workloads may run without the agent hearing from the server:
        the node-lost timeout less the margin in which they are stopped."""
        return self.heartbeat_timeout_s - self.margin_s

    @property
    def fence_kill_s(self) -> float:
        """Seconds between SIGTERM and SIGKILL when a lease runs out (a third of the margin;
        the rest covers polling and process exit)."""
        return self.margin_s / 3

    @property
    def db_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite:///{(self.data_dir / 'gpupool.db').resolve()}"

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return init_settings, env_settings


def load_settings(config: Path | None = None, **overrides: Any) -> Settings:
    """Settings from the environment, then ``config`` (TOML or YAML), then ``overrides``
    (command-line flags; ``None`` values are ignored)."""
    given = {k: v for k, v in overrides.items() if v is not None}
    if config is None:
        return Settings(**given)
    if not config.is_file():
        raise SpecError(f"config: {config} is not a file", field="config")
    suffix = config.suffix.lower()
    if suffix == ".toml":
        source: PydanticBaseSettingsSource = TomlConfigSettingsSource(Settings, config)
    elif suffix in (".yaml", ".yml"):
        source = YamlConfigSettingsSource(Settings, config)
    else:
        raise SpecError(f"config: {config.name} must end in .toml, .yaml or .yml", field="config")
    try:
        from_file = source()
    except Exception as exc:  # a parser's own error type differs per format
        raise SpecError(f"config: {config.name} cannot be read: {exc}", field="config") from None
    env_only = Settings()
    merged = {**from_file, **{k: getattr(env_only, k) for k in env_only.model_fields_set}}
    return Settings(**{**merged, **given})
