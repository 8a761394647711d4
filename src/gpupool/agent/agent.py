"""The node agent: registers its node, heartbeats telemetry, and makes the node's workloads
match the server's orders (start what is granted, stop what is not, report how each ended).

Restart-safe: every workload it starts is recorded on disk with its process-group id, so an
agent that crashed or restarted adopts what still runs, reports what ended meanwhile, stops
what the server no longer wants, and only then (reconcile) takes new work.

No order can stop it (DESIGN.md invariant 9): whatever goes wrong starting or watching one
workload fails that allocation with the reason, and the agent carries on. Workloads are
self-fenced through the node's lease (``gpupool.agent.lease``): they stop on their own when the
agent has not been heard by the server for the lease time.
"""

import contextlib
import logging
import random
import ssl
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import httpx

from gpupool.agent import (
    cgroups,
    checkpoint_stamp,
    replica_sleep,
    replica_watch,
    shutdown,
    stop_signal,
)
from gpupool.agent import processes as proc
from gpupool.agent.api import AgentApi, AgentApiError
from gpupool.agent.backoff import backoff_s, within_lease
from gpupool.agent.card_modes import CardModes
from gpupool.agent.channel import AgentChannel
from gpupool.agent.channel_link import ChannelLink
from gpupool.agent.config import AgentConfig
from gpupool.agent.harvest import Harvest, chores
from gpupool.agent.lease import expired, read_lease, write_lease
from gpupool.agent.mig_layout import MigLayoutError, ensure_instances, in_the_way, layouts
from gpupool.agent.node import (
    allocatable_memory_mib,
    gpu_processes,
    publish_load,
    registration,
    telemetry,
)
from gpupool.agent.poller import OrdersPoller
from gpupool.agent.refusal import refused
from gpupool.agent.sessions import SessionKeeper
from gpupool.agent.state import Record, Store
from gpupool.agent.telemetry_pace import TelemetryPace
from gpupool.agent.vnpu_binding import bind_vnpus
from gpupool.agent.watchdog import Watched, limits_mib, over_limit
from gpupool.agent.workloads import Launcher, LaunchError
from gpupool.client.tls import trust
from gpupool.devices import Located, discover
from gpupool.model.labels import REPLICA_CONTROL_LABEL
from gpupool.model.protocol import OrderOut, OrdersOut
from gpupool.sharing.runtime_env import Grant, local_devices

log = logging.getLogger("gpupool.agent")
HAMI_CORE_PATHS = ("/usr/local/vgpu/libvgpu.so", "/usr/local/lib/libvgpu.so")
STALE_ANSWERS_BEFORE_RESET = 30  # consecutive older answers (~30 s) before trusting them
ERROR_PAUSE_S = 1.0  # after an unexpected error in one round, before the next
DEFAULT_HEARTBEAT_S = 5.0  # with a server that advises no interval (older servers)
MIN_HEARTBEAT_S, MAX_HEARTBEAT_S = 0.2, 60.0  # what advice is followed within
HEARTBEAT_RETRY_S = 2.0  # after a heartbeat that failed, at most this long to the next


class Agent(ChannelLink, Harvest):
    def __init__(
        self,
        config: AgentConfig,
        located: list[Located] | None = None,
        errors: Sequence[str] = (),
        client: httpx.Client | None = None,
    ):
        """``client``: an HTTP client shared by the agents of one process (gpupool up's
        embedded agents), with the server's base URL and the agents' token."""
        self.config = config
        self.name = config.name
        self.api = AgentApi(
            config.server,
            config.token,
            config.name,
            client=client,
            verify=trust(config.ca_file, config.cert_file, config.key_file),
        )
        self.store = Store(config.state_dir)
        if located is None:
            located, inventory = discover(config.devices, config.name)
            errors = inventory.errors
        self.located = located
        self.errors = list(errors)
        self.local = local_devices(located)
        self.by_index = {loc.index: loc for loc in located}
        self.hami_core = config.hami_core or next(
            (p for p in HAMI_CORE_PATHS if Path(p).is_file()), None
        )
        self.memory_mib = config.memory_mib or allocatable_memory_mib(config.reserve_mem_mib)
        self.launcher = Launcher(
            config.name, config.state_dir, config.isolation, self.local, self.hami_core,
            self.memory_mib,
        )  # fmt: skip
        self.lease_s: float | None = None  # from the server; None: no lease (older server)
        self.heartbeat_s = config.heartbeat_s or DEFAULT_HEARTBEAT_S
        self.fence_kill_s = 3.0
        self._disk_checked = 0.0
        self.chores = chores()  # what it does on a job's behalf, off its loop (agent.harvest)
        self._written: dict[int, str] = {}
        self.records: dict[int, Record] = {}
        self.children: dict[int, subprocess.Popen] = {}  # reaped by us while we are the parent
        self.seen_generation = -1
        self.sleeping: set[int] = set()  # devices whose parked engine is to confirm its sleep
        # its own replicas' park/wake endpoints on their control ports (never through a proxy)
        self.replica_client = httpx.Client(trust_env=False)
        self.watch = replica_watch.ReplicaWatch(self.api.readings)
        self.restore_epoch: str | None = None  # the database's, as the last orders said
        self.finished: set[int] = set()  # allocations ended here, still in the last orders
        self._last_answer: OrdersOut | None = None  # the newest orders acted on
        self.state = "unregistered"
        self._next_heartbeat = 0.0
        self._beat_now = threading.Event()  # the channel dropped: over HTTP now
        self._stopping = threading.Event()  # run()'s stop: set while shutting down
        self.refused: list[str] = []  # stale orders refused, for the tests and the logs
        self.modes = CardModes()  # cards switched between MIG and sharing (hybrid pools)
        self._stale_run = 0  # older answers refused in a row
        self._stale_answer: OrdersOut | None = None  # the last of them, offered again
        self.channel: AgentChannel | None = None  # made by run(), as the poller
        self.poller: OrdersPoller | None = None
        self.pace = TelemetryPace()
        self._lease_lock = threading.Lock()  # the channel's thread renews it too
        self._round_at: float | None = None  # its beats say how long a round has run
        self.refusal: str | None = None  # why it stopped: the server refused its credential
        tls = self.api.verify if isinstance(self.api.verify, ssl.SSLContext) else None
        self.sessions = SessionKeeper(self.name, lambda: self.api.server, config.token,
                                      self.store.dir, tls)  # fmt: skip

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> None:
        """Register, adopt what still runs from an earlier life, and reconcile."""
        body = registration(
            self.name,
            self.located,
            cpu_millis=self.config.cpu_millis,
            memory_mib=self.memory_mib,
            labels={**self.config.labels, **self.launcher.labels(), REPLICA_CONTROL_LABEL: "agent"},
            pool=self.config.pool,
            errors=self.errors,
            share=self.config.share,
            instance=self.store.instance(),
        )
        sent = time.monotonic()
        node = self.api.register(body)
        self.state = node["state"]
        self._renew(node, sent)
        self.records = self.store.load_all()
        self.launcher.adopt_ports({a for a, r in self.records.items() if r.port is not None})
        self.reconcile()

    def run(self, stop: threading.Event) -> None:
        """Until ``stop`` is set: heartbeat every ``heartbeat_s``; act on new orders as soon as
        the poller brings them (``agent.poller``: a long poll where the server offers one),
        and look after the workloads at least every ``sync_s``. The server being away is
        logged and retried, never fatal; nor is anything else."""
        started, self._stopping = False, stop
        quit_ = threading.Event()  # its threads' stop: set when this loop ends, however
        self.store.lock()  # raises StateLocked: one agent per state dir
        poller = self.poller = OrdersPoller(self.api, self.config.sync_s, self.config.orders_wait_s)
        polling: threading.Thread | None = None
        if self.config.channel:
            self.channel = self._channel(poller)
            poller.channel = self.channel
        failures = 0
        rng = random.Random()
        try:
            while not stop.is_set():
                try:
                    if not started:
                        self.start()
                        started = True
                    if polling is None:
                        polling = threading.Thread(
                            target=poller.run, args=(quit_,), daemon=True,
                            name=f"orders-{self.name}",
                        )  # fmt: skip
                        polling.start()
                        threading.Thread(
                            target=self.watch.run, args=(quit_,), daemon=True,
                            name=f"replicas-{self.name}",
                        ).start()  # fmt: skip
                        if self.channel is not None:
                            threading.Thread(
                                target=self.channel.run, args=(quit_,), daemon=True,
                                name=f"channel-{self.name}",
                            ).start()  # fmt: skip
                    self._round_at = time.monotonic()
                    if self._beat_now.is_set() or time.monotonic() >= self._next_heartbeat:
                        self.heartbeat()
                    self._round_at = None
                    answer = poller.next(self.config.sync_s)
                    self._round_at = time.monotonic()
                    if stop.is_set():
                        break
                    if answer is None and self._stale_answer is not None:
                        # an idle node gets no new answer after a refused one: offered again,
                        # it is followed once the server has said it long enough (a restore)
                        self.apply(self._stale_answer)
                    # no new answer: the last one again, so what waited on this node (a
                    # preemptor for its victims to exit) starts, and what ended is reported
                    answer = answer or self._last_answer
                    if answer is not None:
                        self.apply(answer)
                    failures = 0
                    self._round_at = None
                except AgentApiError as exc:
                    self._round_at = None  # waiting for the server is not falling behind
                    if stop.is_set():  # shutting down: the server may be gone already
                        break
                    if exc.status == 401:  # removed, revoked: retrying only gets its host 429s
                        self.refusal = refused(self.name, exc)
                        break
                    log.warning("agent %s: %s", self.name, exc)
                    if exc.status == 404:  # the node was removed: register it again
                        started = False
                    failures += 1
                    wait = backoff_s(self.config.sync_s, failures, rng)
                    stop.wait(within_lease(wait, self._lease_left()))
                except Exception:  # a bug must not take the node down: log it, go on
                    self._round_at = None
                    log.exception("agent %s: unexpected error; carrying on", self.name)
                    stop.wait(ERROR_PAUSE_S)
        finally:
            quit_.set()
            shutdown.leave(self)

    def stop_all(self) -> None:
        """Stop every workload (embedded agents, on the way out): ``agent.shutdown``."""
        shutdown.stop_all(self.records, self.store, self._running, self.config.grace_s)

    def remove_stopped_workdirs(self) -> None:
        shutdown.remove_workdirs(self.records, self.store, self._running, self.launcher.cleanup)

    # -- talking to the server ------------------------------------------------------------
    def heartbeat(self) -> None:
        # a heartbeat that fails is tried again soon (the lease runs on), one that is
        # answered not before the interval
        self._beat_now.clear()  # a drop from now on is seen by the next turn
        self._next_heartbeat = time.monotonic() + min(self.heartbeat_s, HEARTBEAT_RETRY_S)
        publish_load((r.load for r in self.records.values()), self.located)
        devices = telemetry(self.located)
        cut = layouts(self.local, self.by_index)
        for entry in devices:
            if entry["index"] in cut:
                entry["mig"] = cut[entry["index"]]
            self.modes.report(entry)
        sent = time.monotonic()
        if self._by_channel(devices, sent):
            self._next_heartbeat = sent + self.heartbeat_s
            return
        node = self.api.heartbeat(devices)
        self.pace.sent(devices, sent, self.held())
        self.state = node["state"]
        self._renew(node, sent)
        self._next_heartbeat = sent + self.heartbeat_s
        if self.state == "fenced":
            self.reconcile()

    def _renew(self, node: dict[str, Any], sent: float) -> None:
        """The server heard us at ``sent`` (or later): the workloads may run until
        ``sent + lease_s`` without hearing from us again."""
        if "lease_s" in node:
            self.lease_s, self.fence_kill_s = node["lease_s"], node["fence_kill_s"]
        advice = node.get("heartbeat_s")
        if (
            self.config.heartbeat_s is None
            and isinstance(advice, int | float)
            and not isinstance(advice, bool)
        ):
            self.heartbeat_s = min(max(float(advice), MIN_HEARTBEAT_S), MAX_HEARTBEAT_S)
        self._renew_lease(sent)

    def _renew_lease(self, sent: float) -> None:
        if self.lease_s is not None:
            with self._lease_lock:
                write_lease(self.store.lease, sent + self.lease_s)

    def _lease_left(self) -> float | None:
        """Seconds before the lease stops this node's workloads; None when none runs under it."""
        if self.lease_s is None or all(r.released for r in self.records.values()):
            return None
        deadline = read_lease(self.store.lease)
        return None if deadline is None else deadline - time.monotonic()

    def reconcile(self) -> None:
        """Tell the server what runs here; stop what it no longer wants. A fenced node is
        ready again once nothing stale is left."""
        for _ in range(3):
            running = sorted(a for a, r in self.records.items() if not r.released)
            sent = time.monotonic()
            answer = self.api.reconcile(running)
            self.state = answer["state"]
            self._renew(answer, sent)
            for alloc_id in answer["stop"]:
                self._begin_stop(self.records[alloc_id], "released while the node was away")
                self.records[alloc_id].released = True
                self.store.save(self.records[alloc_id])
            if not answer["stop"]:
                return

    def sync(self) -> None:
        """Fetch the orders now and act on them (what the loop does as answers come)."""
        self.apply(self.api.orders())

    def apply(self, answer: OrdersOut) -> None:
        """Match the workloads to ``answer``, the server's orders for this node."""
        epoch = answer.restore_epoch
        restored = self.restore_epoch is not None and epoch != self.restore_epoch
        if restored:  # gpupool admin restore: its orders are the truth now, older or not
            log.warning(
                "agent %s: the database was restored from a backup (restore epoch %s); "
                "following its orders at generation %s",
                self.name,
                epoch,
                answer.generation,
            )
        self.restore_epoch = epoch
        stale = answer.generation < self.seen_generation and not restored
        if stale and self._stale_run < STALE_ANSWERS_BEFORE_RESET:
            self._stale_run += 1
            self._stale_answer = answer
            if self._stale_run % 10 == 1:  # not every second while it lasts
                self.refused.append(f"orders at generation {answer.generation}")
                log.warning(
                    "agent %s: refused orders at generation %s, already acted on %s",
                    self.name,
                    answer.generation,
                    self.seen_generation,
                )
            return
        if stale:  # a database restored from a backup counts again from lower: follow it
            log.warning("agent %s: the server's generation went back; following it", self.name)
        if (
            stale
            or restored
            or not (answer is self._last_answer and self._stale_answer is not None)
        ):
            # followed, or news: a refused answer stands only while the last one acted on
            # is all that comes again
            self._stale_run, self._stale_answer = 0, None
        self.seen_generation = answer.generation
        self.state = answer.node_state
        if self.state == "fenced":
            self.reconcile()
            return
        desired = {o.id: o for o in answer.orders}
        for alloc_id, rec in self.records.items():
            if alloc_id not in desired and not rec.released:
                rec.released = True
                self._begin_stop(rec, "allocation released by the server")
        self._last_answer = answer
        self._enforce_limits(desired)
        self._harvest()
        # after the harvest: a wake waits for the jobs vacated from its card to have ended
        self.sleeping, changed, cannot, faults = replica_sleep.follow(
            self.replica_client, self.records, desired, self.watch.seen()
        )
        for rec in changed:
            self.store.save(rec)
        for rec in cannot:
            self._begin_stop(rec, rec.stop_reason)
        for alloc_id, what in faults:
            self.watch.fault(alloc_id, what)
        for rec, at in checkpoint_stamp.fresh(self.records):
            rec.checkpointed_at = at  # once: a server that cannot take it is not asked again
            self.store.save(rec)
            with contextlib.suppress(AgentApiError):  # the next checkpoint tells it again
                self.api.checkpointed(rec.alloc_id, rec.generation, at)
        self.launcher.refresh_ports()
        if answer.modes:
            self._switch_modes(dict(answer.modes))
        # an answer read before this agent reported an end may still list that allocation:
        # it is never started again (answers come in order, so one without it ends the watch)
        self.finished &= set(desired)
        for rec in [r for r in self.records.values() if not (r.start_reported or r.released)]:
            with contextlib.suppress(AgentApiError):  # still away: the next round says it
                self._report_start(rec)
        for alloc_id, order in desired.items():
            if alloc_id not in self.records and alloc_id not in self.finished:
                self._start_safely(order)
        self.watch.watch(replica_watch.targets(self.records, desired))
        self.sessions.follow(self.records, desired)  # shell sessions: agent.sessions
        self._upload_round()

    def _upload_round(self) -> None:
        try:
            self._upload_logs()
        except Exception as exc:  # next round tries again from the same offsets
            if not self._stopping.is_set():  # shutting down: the server may be gone already
                log.warning("agent %s: log upload: %s", self.name, exc)

    def _switch_modes(self, wanted: dict[int, str]) -> None:
        """Cards the server ordered into MIG mode or out of it, once nothing runs there."""
        busy = {i for r in self.records.values() for i in r.load}
        failed = len(self.modes.failed)
        if self.modes.apply(wanted, self.by_index, self.local, busy):
            self.located = [self.by_index[loc.index] for loc in self.located]
            self._next_heartbeat = 0.0  # tell the server now
        if len(self.modes.failed) > failed:
            self._next_heartbeat = 0.0  # and why a card stays as it is

    # -- workloads ------------------------------------------------------------------------
    def _grants(self, order: OrderOut) -> list[Grant]:
        return [
            Grant(**d.model_dump()) for n in order.nodes if n.node == self.name for d in n.devices
        ]

    def _start_safely(self, order: OrderOut) -> None:
        """Start one order; whatever goes wrong fails that allocation, never the agent."""
        try:
            self._start(order)
        except AgentApiError:
            raise  # the server is away: the next round retries
        except LaunchError as exc:
            self._refuse(order, str(exc))
        except Exception as exc:
            log.exception("agent %s: cannot start allocation %s", self.name, order.id)
            self._refuse(order, f"cannot start: {type(exc).__name__}: {exc}"[:1000])

    def _start(self, order: OrderOut) -> None:
        alloc_id, generation = order.id, order.generation
        if order.job_state not in ("admitted", "running"):
            return
        if any(a in self.records for a in order.after):
            return  # the victims it preempted still run here: wait for them to stop
        if self.sleeping & {g.device for g in self._grants(order)}:
            return  # a parked replica's engine there has not yet freed the card
        if order.ended_here:
            return  # this node's part of the gang ended well; the others still run
        started_here = order.started_here  # None: an older server, the job's state only
        if started_here or (started_here is None and order.job_state == "running"):
            # the server knows this node's part started, but we have no record (state lost);
            # a part of a gang another node started first is started here now
            self._refuse(order, "the agent has no record of this workload")
            return
        fenced = self.lease_s is not None and order.on_lost != "keep-running"
        if fenced and expired(self.store.lease):
            # the server was away and the lease ran out: a workload started now would stop
            # itself at once (seen after a database outage). Beat now, start after.
            self._next_heartbeat = 0.0
            return
        stopping = {u for r in self.records.values() if r.released for u in r.limits_mib}
        busy = {u for r in self.records.values() for u in r.limits_mib}
        try:  # vNPUs bound first: a bound grant names an existing instance
            grants = bind_vnpus(self._grants(order), self.local, self.by_index, busy, stopping)
            if grants is None or in_the_way(grants, self.local, self.by_index) & stopping:
                return  # a released workload still stops on those slices: next round
            ensure_instances(grants, self.local, self.by_index, busy)
        except MigLayoutError as exc:
            raise LaunchError(str(exc)) from None
        lease = self.store.lease if self.lease_s is not None else None
        folder = self.store.dir(alloc_id)
        ready = self.launcher.prepare(order, grants, lease, self.fence_kill_s, folder)
        try:
            child = proc.launch(folder, ready.spec)
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            self.launcher.cleanup(ready.workdir, ready.cgroups, ready.mps, self._mps_in_use(),
                                  alloc_id if ready.port is not None else None)  # fmt: skip
            self.store.remove(alloc_id)
            raise LaunchError(f"cannot start: {exc}") from None
        rec = Record(
            alloc_id=alloc_id,
            job_id=order.job_id,
            generation=generation,
            pid=child.pid,
            ticks=proc.start_ticks(child.pid) or 0,
            started_at=time.time(),
            max_runtime_s=order.max_runtime_s,
            limits_mib=limits_mib(grants, self.local),
            load={g.device: g.compute_pct / 100 for g in grants},
            workdir=ready.workdir,
            cgroups=ready.cgroups,
            mps=ready.mps,
            mem_mib=ready.mem_mib,
            outputs=asdict(ready.outputs) if ready.outputs else None,
            port=ready.port,
            control=ready.control,
            disk_mib=ready.disk_mib,
            checkpoint=order.checkpoint,
            tenant=order.tenant,
            start_reported=False,
            interactive=order.interactive or "",
        )
        self.records[alloc_id] = rec
        self.children[alloc_id] = child
        self.store.save(rec)
        self._report_start(rec)

    def _report_start(self, rec: Record) -> None:
        """Tell the server the workload started, and when (its meter runs from then); again
        each round while the server is away (the end report says it too)."""
        extra = {"node": self.name} | ({"port": rec.port} if rec.port is not None else {})
        started = f"started on {self.name}"
        try:
            heard = self.api.report(rec.alloc_id, rec.generation, "running", reason=started,
                                    started_at=rec.started_at, **extra)  # fmt: skip
        except AgentApiError as exc:
            if exc.status is None or exc.status >= 500:
                raise  # away, or failing for now
            log.warning("agent %s: start of allocation %s refused: %s", self.name, rec.alloc_id,
                        exc)  # fmt: skip
            heard = True  # for good: its end report says when it started
        if heard:
            rec.start_reported = True
            self.store.save(rec)
        else:
            self.refused.append(f"allocation {rec.alloc_id} generation {rec.generation}")
            rec.released = True
            self._begin_stop(rec, "stale order refused by the server")

    def _refuse(self, order: OrderOut, why: str) -> None:
        self.api.report(order.id, order.generation, "failed", reason=why)
        self.finished.add(order.id)

    def _mps_in_use(self) -> set[str]:
        return {uuid for r in self.records.values() for uuid in r.mps}

    def _running(self, rec: Record) -> bool:
        child = self.children.get(rec.alloc_id)
        if child is not None:
            return child.poll() is None
        return proc.alive(rec.pid, rec.ticks)

    def _begin_stop(self, rec: Record, reason: str) -> None:
        if rec.stop_sent_at is None:
            rec.stop_reason = rec.stop_reason or reason
            rec.stop_sent_at = time.time()
            self.sessions.end(rec.alloc_id, rec.stop_reason)  # its terminals told first
            stop_signal.send_stop(rec)
            self.store.save(rec)

    def _enforce_limits(self, desired: dict[int, OrderOut]) -> None:
        """Max runtime, the grace period of a stop, and the memory watchdog."""
        now = time.time()
        for rec in self.records.values():
            if rec.max_runtime_s and now - rec.started_at > rec.max_runtime_s:
                self._begin_stop(rec, f"max runtime {rec.max_runtime_s} s exceeded")
            elif rec.stop_sent_at is None and stop_signal.warn_if_due(rec, now):
                self.store.save(rec)
            grace = stop_signal.grace_s(rec, self.config.grace_s)
            if rec.stop_sent_at and not rec.killed and now - rec.stop_sent_at > grace:
                proc.signal_group(rec.pid, proc.KILL)
                cgroups.kill(rec.cgroups)  # also what left the process group
                rec.killed = True
                self.store.save(rec)
        self._enforce_disk(now)
        watched = [
            Watched(r.alloc_id, frozenset(proc.group_pids(r.pid)), r.limits_mib)
            for r in self.records.values()
            if r.stop_sent_at is None
        ]
        if not watched:
            return
        for violation in over_limit(watched, gpu_processes(self.located)):
            rec = self.records[violation.key]
            log.warning("agent %s: allocation %s: %s", self.name, rec.alloc_id, violation.reason)
            self._begin_stop(rec, violation.reason)
