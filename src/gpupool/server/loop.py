"""The scheduler loop: the one place that joins the pure engine to the database.

A thread in the server process. It takes the lead when it can, then makes a pass whenever
something changed (an API call wakes it) and at least every ``cycle_interval_s``. A pass runs
the duties that are due (``control/runner.py``): liveness, metering checkpoints, budgets,
the scheduling cycle (read the snapshot, decide with ``run_cycle``, commit every decision in
one fenced transaction), alerts, pool samples, log retention and the proof of life. One duty
failing never stops the others; the service reconciler runs in its own thread the same way.
"""

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from datetime import UTC, datetime

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from gpupool.billing.money import yuan
from gpupool.model import Job
from gpupool.scheduler import Placer
from gpupool.scheduler.cycle import CycleResult, run_cycle
from gpupool.scheduler.estimates import Plan, plan_starts
from gpupool.scheduler.reasons import Cause, Reason, Wait
from gpupool.server.admission import LimitCache
from gpupool.server.advisory import hold_back, mode_switches
from gpupool.server.alerts.facts import budget_facts, gather
from gpupool.server.alerts.rules import BudgetFact, Limits, firing
from gpupool.server.alerts.store import reconcile
from gpupool.server.alerts.webhook import due, record, send
from gpupool.server.capacity import PoolCapacity
from gpupool.server.checkpoint import boundary, checkpoint
from gpupool.server.commit import LostLeadership, commit_cycle
from gpupool.server.control.runner import Duty, Runner
from gpupool.server.cycle_config import cycle_config, unknown_names
from gpupool.server.cycle_timing import CycleTiming
from gpupool.server.db.engine import Database
from gpupool.server.db.tables import AuditRow, JobEventRow, Meta
from gpupool.server.fair_usage import HistoryCache
from gpupool.server.fence import hold_lead
from gpupool.server.hybrid_modes import order_switches
from gpupool.server.interactive import cull_duty
from gpupool.server.interactive.idle_policy import IdleRule
from gpupool.server.leader import Leadership
from gpupool.server.liveness import any_silent, mark_lost_nodes
from gpupool.server.log_retention import prune_logs
from gpupool.server.metrics import Metrics
from gpupool.server.pool_read import record_sample
from gpupool.server.replacements import end_replaced
from gpupool.server.services.reconcile import ServiceReconciler
from gpupool.server.settings import Settings
from gpupool.server.snapshot import CycleInputs, SnapshotBuilder
from gpupool.server.start_estimates import expected_runs
from gpupool.server.start_estimates import store as store_estimates
from gpupool.server.usage_elsewhere import charge_elsewhere, kube_usage
from gpupool.server.wake import WakeSender

LOG_PRUNE_EVERY_S = 3600.0
DELIVERY_BUDGET_S = 10.0  # one pass of alert deliveries; the rest are retried
LIFE_PROOF_S = 5.0
log = logging.getLogger("gpupool.scheduler")


def with_expected_starts(result: CycleResult) -> None:
    """Add backfill's expected start time (UTC, to the minute) to the reasons of the pending
    heads it computed one for."""
    for job_id, at in result.starts_by.items():
        if job_id in result.pending:
            when = datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%MZ")
            more = f"expected start by {when} (running jobs' time limits)"
            result.pending[job_id] = result.pending[job_id].also(more)


def leads(s: Session, epoch: int) -> bool:
    """Whether ``epoch`` is still the leader's (read in the writing transaction)."""
    return s.execute(select(Meta.leader_epoch).where(Meta.id == 1)).scalar_one() == epoch


class SchedulerLoop:
    def __init__(self, db: Database, settings: Settings, metrics: Metrics):
        self.db = db
        self.settings = settings
        self.metrics = metrics
        self.leadership = Leadership(db)
        self.snapshots = SnapshotBuilder(self.settings.agent_lag_max_s)
        self.capacity = PoolCapacity()  # which waiting jobs can never run
        # replicas: health, endpoints, scale; parks and wakes wake the scheduler
        self.services = ServiceReconciler(db, settings, self.wake, lambda: self.leadership.epoch)
        self._metered_to = float("-inf")  # the last metering boundary checkpointed
        self._mass_said = float("-inf")
        self.limits = LimitCache(settings)
        self.timing = CycleTiming(0.0, 0.0, 0.0, 0, 0, 0, 0)  # the last cycle's
        self.usage_history = HistoryCache()  # fair share's past (None while it is off)
        self._unknown_said: list[str] = []  # minimum run time settings naming nothing
        self._defrag_left = settings.defrag_moves_per_hour  # as the last cycle counted
        self._moves: deque[float] = deque()  # when defragmentation moved jobs (last hour)
        self.over_budget: dict[str, str] = {}  # tenant -> why it may not borrow now
        self._crossed: set[tuple[str, str, int]] = set()  # budget thresholds reached
        st = settings
        self.duties = Runner(
            [
                Duty("liveness", self.check_liveness),
                Duty("metering", self.checkpoint_usage),
                Duty("budgets", self.check_budgets, st.cycle_interval_s),
                # before the cycle: a card taken back from an idle session is granted at once
                Duty("idle-culling", self.cull_idle, st.session_idle_check_s),
                Duty("scheduling", self.cycle),
                Duty("alerts", self.check_alerts, st.alert_interval_s),
                Duty("pool-samples", self.sample_pool, st.sample_interval_s),
                Duty("log-retention", self.prune_logs, LOG_PRUNE_EVERY_S),
                Duty("life", self.prove_life, min(LIFE_PROOF_S, st.health_no_leader_s / 3)),
            ],
            metrics,
        )
        self.service_duties = Runner([Duty("services", self._step_services)], metrics)
        # alert deliveries: their own thread, so a receiver that never answers delays no cycle
        self.delivery_duties = Runner(
            [Duty("alert-delivery", self.deliver_alerts, st.alert_interval_s)], metrics
        )
        # start-time estimates: their own thread, snapshot and history (a plan takes up to
        # estimate_budget_s, which no cycle waits for)
        self.estimate_duties = Runner(
            [Duty("start-estimates", self.estimate_starts, st.estimate_interval_s)], metrics
        )
        self.estimate_snapshots = SnapshotBuilder(st.agent_lag_max_s)
        self.estimate_history = HistoryCache()
        self._estimating: threading.Thread | None = None
        self._deliveries = threading.Event()
        self._delivering: threading.Thread | None = None
        self._wake = threading.Event()
        self.remote: WakeSender | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._services: threading.Thread | None = None
        self.cycles = 0
        self._seen_event = 0

    @property
    def is_leader(self) -> bool:
        return self.leadership.held

    def wake(self) -> None:
        self._wake.set()
        if self.remote is not None:  # the scheduler process beside the API workers
            self.remote.poke()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="gpupool-scheduler", daemon=True)
        self._thread.start()
        self._services = threading.Thread(
            target=self._run_services, name="gpupool-services", daemon=True
        )
        self._services.start()
        self._delivering = threading.Thread(
            target=self._run_deliveries, name="gpupool-alert-delivery", daemon=True
        )
        self._delivering.start()
        if self.settings.estimate_interval_s > 0:
            self._estimating = threading.Thread(
                target=self._run_estimates, name="gpupool-start-estimates", daemon=True
            )
            self._estimating.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self._deliveries.set()
        for thread in (self._thread, self._services, self._delivering, self._estimating):
            if thread is not None:
                thread.join(timeout=30)
        self.services.probes.close()
        self.leadership.release()

    def trouble(self) -> tuple[list[str], list[str]]:
        """What /healthz says of this process's duties while it leads: (threads that stopped
        — it cannot do its job —, duties failing now, each with its last error)."""
        if not self.leadership.held:
            return [], []
        threads = {"scheduling": self._thread, "services": self._services,
                   "alert delivery": self._delivering,
                   "start estimates": self._estimating}  # fmt: skip
        stopped = [f"its {name} thread stopped" for name, t in threads.items()
                   if t is not None and not t.is_alive() and not self._stop.is_set()]  # fmt: skip
        failing = [
            f"{name} failing ({h.failures} in a row: {h.last_error})"
            for runner in (
                self.duties,
                self.service_duties,
                self.delivery_duties,
                self.estimate_duties,
            )
            for name, h in runner.health.items()
            if h.failures
        ]
        return stopped, failing

    @property
    def last_error(self) -> str:
        """The scheduling duty's last error while it keeps failing ("" once it succeeds)."""
        return self.duties.health["scheduling"].last_error

    def _step_services(self, now: float) -> None:
        self.services.step(now)

    def _run_services(self) -> None:
        """The service reconciler, in its own thread while this process leads: a tenant's
        replicas that answer slowly delay their own services' checks, never a scheduling
        cycle."""
        self._beside_the_cycle(self.service_duties, lambda: self._stop.wait(
            self.settings.service_interval_s))  # fmt: skip

    def _run_estimates(self) -> None:
        """Start-time plans, in their own thread while this process leads."""
        pause = min(1.0, self.settings.estimate_interval_s)
        self._beside_the_cycle(self.estimate_duties, lambda: self._stop.wait(pause))

    def _run_deliveries(self) -> None:
        """Alert deliveries, in their own thread while this process leads: at every alert
        pass that found a change, and every ``alert_interval_s`` for retries."""

        def pause() -> None:
            self._deliveries.wait(self.settings.alert_interval_s)
            self._deliveries.clear()

        self._beside_the_cycle(self.delivery_duties, pause)

    def _beside_the_cycle(self, duties: Runner, pause: Callable[[], object]) -> None:
        """A thread of duties beside the scheduling one: each run while this process leads;
        a failure is the runner's (logged, retried); a lost lead ends only that pass (the
        scheduling thread lets the lead go)."""
        while not self._stop.is_set():
            if self.leadership.held:
                try:
                    duties.run_due(time.time())
                except LostLeadership as exc:
                    log.warning("%s: not written, the lead was lost: %s",
                                duties.duties[0].name, exc)  # fmt: skip
            pause()

    def _run(self) -> None:
        while not self._stop.is_set():
            if not self.leadership.try_acquire():
                self._stop.wait(self.settings.leader_poll_s)
                continue
            if self.snapshots.base is None:
                log.info("took the scheduler lead", extra={"epoch": self.leadership.epoch})
            self._wake.clear()
            started = time.perf_counter()
            try:
                self.duties.run_due(time.time())
            except LostLeadership as exc:
                log.warning("lost the scheduler lead: %s", exc)
                self.leadership.release()
                self.snapshots = SnapshotBuilder(self.settings.agent_lag_max_s)
                self.duties.reset()
            # a burst of submissions is decided in a few batches, not one cycle per request:
            # leave the API at least half as much time as the last cycle took
            self._stop.wait(
                max(self.settings.cycle_min_gap_s, 0.5 * (time.perf_counter() - started))
            )
            self._wait_for_change()

    def _latest_event(self) -> int:
        # ten times a second: a plain connection, not an ORM session (a fifth of the CPU)
        with self.db.read_engine.connect() as conn:
            return conn.execute(select(func.max(JobEventRow.id))).scalar() or 0

    def _wait_for_change(self) -> None:
        """Until this process wakes us, another process (an API worker, a second server)
        records a job event, or ``cycle_interval_s`` passes."""
        deadline = time.monotonic() + self.settings.cycle_interval_s
        poll = max(0.05, 2 * self.settings.cycle_min_gap_s)
        while not self._stop.is_set():
            left = deadline - time.monotonic()
            if left <= 0 or self._wake.wait(min(poll, left)):
                return
            try:
                if self._latest_event() != self._seen_event:
                    return
            except Exception:  # the database is away: the cycle will say so
                return

    def check_liveness(self, now: float | None = None) -> list[str]:
        """Mark nodes lost that stopped heartbeating; their jobs are requeued or failed.
        A new leader first waits one timeout: agents could not heartbeat while no server ran
        (a restart, a fail-over), and must get the chance before they are judged."""
        now = time.time() if now is None else now
        epoch = self.leadership.epoch
        if epoch is None:
            raise LostLeadership("not the leader")
        timeout = self.settings.heartbeat_timeout_s
        if now - self.leadership.since < timeout:
            return []
        with self.db.read() as s:  # the common case writes nothing
            if not any_silent(s, now, timeout):
                return []
        with self.db.write() as s:
            stops = self.settings.lease_s + self.settings.fence_kill_s
            mass = self.settings.mass_silence_fraction
            lost = mark_lost_nodes(s, now, timeout, epoch, stops, mass)
        if lost:
            log.warning("nodes lost", extra={"nodes": lost})
        elif now - self._mass_said >= 60:  # silent nodes, none marked: a mass silence
            self._mass_said = now
            log.warning("many nodes silent at once: none marked lost, their jobs stay (a "
                        "network or control-plane failure?)")  # fmt: skip
        return lost

    def checkpoint_usage(self, now: float | None = None) -> int:
        """Meter live allocations up to the last metering boundary, once per boundary."""
        now = time.time() if now is None else now
        interval = self.settings.metering_interval_s
        if boundary(now, interval) <= self._metered_to:
            return 0
        with self.db.write() as s:
            hold_lead(s, self.leadership.epoch)
            done = checkpoint(s, now, interval)
        self._metered_to = boundary(now, interval)
        return done

    def cull_idle(self, now: float | None = None) -> cull_duty.Applied:
        """Warn, then release, interactive sessions idle past their idle timeout
        (``interactive.culling``): read, decide, apply under the lead's fence."""
        now = time.time() if now is None else now
        st = self.settings
        default = IdleRule(st.session_idle_timeout_s, st.session_idle_warning_s)
        with self.db.read() as s:
            decisions = cull_duty.plan(s, default, now)
        if not decisions:
            return cull_duty.Applied()
        with self.db.write() as s:
            hold_lead(s, self.leadership.epoch)
            done = cull_duty.apply(s, decisions, now)
        if done.released or done.warned:
            log.info("idle sessions", extra={"warned": done.warned, "released": done.released})
        return done

    def prove_life(self, now: float | None = None) -> None:
        """Every few seconds while leading and scheduling: the stamp /healthz reads (fenced
        by the epoch). A leader whose cycles keep failing stops stamping, so /healthz turns
        503 instead of answering 200 while nothing is scheduled."""
        now = time.time() if now is None else now
        if not self.duties.ok_within("scheduling", now, self.settings.health_no_leader_s):
            return
        with self.db.write() as s:
            s.execute(
                update(Meta)
                .where(Meta.id == 1, Meta.leader_epoch == self.leadership.epoch)
                .values(leader_seen_at=now)
            )

    def prune_logs(self, now: float | None = None) -> int:
        """Job logs past their retention, and beyond a tenant's limit (a duty run hourly)."""
        now = time.time() if now is None else now
        retention = self.settings.log_retention_days * 86400
        with self.db.write() as s:
            hold_lead(s, self.leadership.epoch)
            return prune_logs(s, now, retention, self.limits)

    def check_alerts(self, now: float | None = None) -> None:
        """Fire and resolve alerts from the state of record, note which tenants exhausted a
        stop-elastic budget, and deliver what changed (a duty run every ``alert_interval_s``)."""
        now = time.time() if now is None else now
        st = self.settings
        limits = Limits(st.alert_pending_minutes, st.alert_temp_c, st.alert_idle_minutes)
        with self.db.write() as s:
            hold_lead(s, self.leadership.epoch)
            facts = gather(s, now, st.billing_zone, limits)
            reconcile(s, firing(facts), now)
        self._note_budgets(facts.budgets)
        if st.alert_webhook_url:
            self._deliveries.set()  # posted by their own thread, outside any transaction

    def deliver_alerts(self, now: float | None = None) -> int:
        """Post the alert changes due to the webhook (the outbox ``alerts.webhook``): read,
        posted outside any transaction within ``DELIVERY_BUDGET_S``, what came of it written
        back under the lead's fence; how many were delivered."""
        now = time.time() if now is None else now
        st = self.settings
        if not st.alert_webhook_url:
            return 0
        with self.db.read() as s:
            todo = due(s, st.alert_webhook_secret, now)
        if not todo:
            return 0
        sent = send(todo, st.alert_webhook_url, DELIVERY_BUDGET_S)
        with self.db.write() as s:
            hold_lead(s, self.leadership.epoch)
            return record(s, sent, now)

    def check_budgets(self, now: float | None = None) -> None:
        """Each budget's month-to-date spend, live allocations included up to now (a duty
        run before cycles, at most once a ``cycle_interval_s``: a burst of cycles reads the
        invoices once), so stop-elastic acts within a cycle interval of the line being
        crossed, and the alerts are evaluated at once when a threshold is crossed."""
        now = time.time() if now is None else now
        with self.db.read() as s:
            budgets = budget_facts(s, now, self.settings.billing_zone)
        if self._note_budgets(budgets):
            self.check_alerts(now)

    def _note_budgets(self, budgets: Iterable[BudgetFact]) -> bool:
        """Remember which tenants may not borrow; True when the thresholds crossed changed."""
        budgets = list(budgets)
        self.over_budget = {
            b.tenant: (
                f"budget: {b.tenant} has spent its budget for {b.month} "
                f"({yuan(b.spent_fen)} of {yuan(b.budget_fen)}); work beyond its "
                "guarantee waits"
            )
            for b in budgets
            if b.exhausted and b.action == "stop-elastic"
        }
        crossed = {(b.tenant, b.month, t) for b in budgets for t in b.crossed()}
        changed, self._crossed = crossed != self._crossed, crossed
        return changed

    def defrag_budget(self, now: float) -> int:
        """Moves defragmentation may still make this hour (``defrag_moves_per_hour``)."""
        while self._moves and self._moves[0] <= now - 3600:
            self._moves.popleft()
        return max(0, self.settings.defrag_moves_per_hour - len(self._moves))

    def audit_moves(self, s: Session, result: CycleResult, now: float) -> None:
        """Every defragmentation move in the audit log, and counted against the hour; the
        copies a reservation that began makes, audited (not counted)."""
        for r in result.replacements:
            moved = "DEFRAGMENT"
            if r.cause is Cause.RESERVATION:  # not a defragmentation move: not counted
                moved = "RESERVATION"
            else:
                self._moves.append(now)
            where = "+".join(dict.fromkeys(r.placement.node_names))
            s.add(
                AuditRow(time=now, actor="scheduler", role="", action=f"{moved} copy",
                         target=f"job {r.job_id} -> a copy on {where} (make-before-break)",
                         result=200, client="", detail=r.reason[:2000])
            )  # fmt: skip
        why = {b.job_id: b.note for b in result.bindings if b.action == "defragment"}
        for p in result.preemptions:
            if p.by in why and p.cause is Cause.DEFRAGMENT:
                self._moves.append(now)
                s.add(
                    AuditRow(
                        time=now,
                        actor="scheduler",
                        role="",
                        action="DEFRAGMENT move",
                        target=f"job {p.job_id} -> {p.reason}"[:500],
                        result=200,
                        client="",
                        detail=why[p.by][:2000],
                    )
                )

    def sample_pool(self, now: float | None = None) -> None:
        """The pool's utilisation for the dashboard's history (every ``sample_interval_s``)."""
        now = time.time() if now is None else now
        with self.db.write() as s:
            hold_lead(s, self.leadership.epoch)
            record_sample(s, now)

    def mark_never(self, result: CycleResult, pending: list[Job]) -> None:
        """A waiting job no node of the pool could ever hold, or above its tenant's ceiling
        (the pool shrank, a quota was lowered) says so in its reason instead of a passing
        shortage."""
        waiting = [j for j in pending if j.id in result.pending]
        if not waiting:
            return
        if self.capacity.stale():
            self.capacity.refresh(self.db)
        for job in waiting:
            why = self.capacity.never_for(job)
            if why is not None:
                result.pending[job.id] = Reason(Wait.NEVER, why)

    def _say_unknown(self, inputs: CycleInputs) -> None:
        """Minimum run times naming no class or tenant here: said once, again when changed."""
        unknown = unknown_names(self.settings, inputs)
        if unknown and unknown != self._unknown_said:
            log.warning("minimum run times name what this server does not have, and protect "
                        "nothing there: %s", "; ".join(unknown))  # fmt: skip
        self._unknown_said = unknown

    def estimate_starts(self, now: float | None = None) -> Plan | None:
        """Every pending job's estimated start and nodes (a duty run every
        ``estimate_interval_s``): read what the cycle reads and the ended jobs, plan with the
        real cycle run forward within ``estimate_budget_s`` (no transaction open), replace the
        stored estimates under the fence (``server/start_estimates.py``)."""
        now = time.time() if now is None else now
        epoch = self.leadership.epoch
        if epoch is None:
            raise LostLeadership("not the leader")
        try:
            with self.db.read() as s:
                inputs = self.estimate_snapshots.build(s, self.over_budget)
                half_life_h = self.settings.fairshare_half_life_h
                history = self.estimate_history.history(s, now, half_life_h)
                ids = [j.id for j in inputs.pending]
                expected = expected_runs(s, inputs.running, ids, now)
        except Exception:  # the next plan reads everything again
            self.estimate_snapshots = SnapshotBuilder(self.settings.agent_lag_max_s)
            raise
        plan = plan_starts(
            inputs.state,
            inputs.running,
            inputs.pending,
            inputs.tenants,
            now,
            expected,
            reservations=inputs.reservations,
            # defragmentation's moves left this hour, as last counted (the cycle's thread owns
            # the count): the plan moves no more than the cycle may
            config=cycle_config(self.settings, inputs, self._defrag_left),
            history=history,
            budget_s=self.settings.estimate_budget_s,
        )
        with self.db.write() as s:
            hold_lead(s, epoch)
            store_estimates(s, plan, now)
        return plan

    def cycle(self, now: float) -> None:
        """The scheduling duty: a cycle; after a failure the next one reads everything."""
        try:
            self.run_once(now)
        except LostLeadership:
            raise
        except Exception:
            self.snapshots = SnapshotBuilder(self.settings.agent_lag_max_s)
            raise

    def run_once(self, now: float | None = None) -> None:
        """One cycle: snapshot, decide, commit (also called directly by tests)."""
        started = time.perf_counter()
        now = time.time() if now is None else now
        epoch = self.leadership.epoch
        if epoch is None:
            raise LostLeadership("not the leader")
        with self.db.exclusive():
            self._seen_event = self._latest_event()
            with self.db.read() as s:
                inputs = self.snapshots.build(s, self.over_budget)
                # one guarantee across the pool and the clusters reporting here
                charge_elsewhere(inputs.tenants, kube_usage(s))
                history = self.usage_history.history(s, now, self.settings.fairshare_half_life_h)
            snapshot = time.perf_counter()
            self._say_unknown(inputs)
            self._defrag_left = self.defrag_budget(now)
            config = cycle_config(self.settings, inputs, self._defrag_left)
            result = run_cycle(
                inputs.state,
                inputs.running,
                inputs.pending,
                inputs.tenants,
                now,
                inputs.reservations,
                config,
                Placer(self.settings.policy),
                parks=inputs.parks,
                history=history,
            )
            with_expected_starts(result)
            self.mark_never(result, inputs.pending)
            result.pending.update((j, Reason(Wait.INVALID, w)) for j, w in inputs.invalid.items())
            result.pending.update((j, Reason(Wait.GATED, w)) for j, w in inputs.gated.items())
            decided = time.perf_counter()
            with self.db.write() as s:
                hold_back(s, result, now, self.settings.proposal_ttl_s)  # advisory actions
                summary = commit_cycle(s, result, epoch, inputs.allocation_of, inputs.reasons, now)
                self.audit_moves(s, result, now)
                if leads(s, epoch):  # what follows changes state without a fenced commit
                    ttl = self.settings.proposal_ttl_s
                    order_switches(
                        s, result, inputs.pending, now, self.settings.mode_switch_timeout_s,
                        mode_switches(s, now, ttl),
                    )  # fmt: skip
                    end_replaced(s, now, inputs.copies)
        tenants = {j.id: j.tenant for j in inputs.pending}
        for job_id, waited in summary.admitted:
            tenant = tenants.get(str(job_id), "")
            self.metrics.queue_wait.labels(tenant).observe(max(0.0, waited))
            self.metrics.admissions.labels(tenant).inc()
        self.metrics.preemptions.inc(summary.preempted)
        for tenant, lost in summary.lost_gpu_s.items():
            self.metrics.preemption_lost.labels(tenant).inc(lost)
        ended = time.perf_counter()
        self.metrics.cycle_seconds.observe(ended - started)
        self.timing = CycleTiming(
            snapshot - started, decided - snapshot, ended - decided, len(inputs.pending),
            len(inputs.running), len(summary.admitted), summary.preempted,
        )  # fmt: skip
        self.cycles += 1
        if summary.admitted or summary.preempted:
            log.info(
                "cycle",
                extra={
                    "admitted": len(summary.admitted),
                    "preempted": summary.preempted,
                    "pending": len(result.pending),
                    "generation": summary.generation,
                    "decide_s": round(decided - started, 4),
                    "commit_s": round(time.perf_counter() - decided, 4),
                },
            )
