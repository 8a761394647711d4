"""The leader's service reconciler, beside the scheduler loop: health-check the replicas,
publish the ready ones, replace failed ones, scale each service and drain what it scales in.

Every ``service_interval_s``: read the services and their replicas with what their nodes'
agents last found looking at them on their control ports (``services.readings``; replicas on
nodes whose agents are too old to look are probed here over HTTP outside any transaction,
``replicas.probe_pool``), then write what changed in one transaction. A replica is ready from its
first 2xx health answer; a ready replica that fails ``service_failures`` checks in a row, or
one not ready within twice its start-up time (at least start-up + 30 s), is stopped and
replaced. Replacements of replicas that keep failing back off: doubling from
``service_backoff_s`` to ``service_backoff_max_s``, the status saying why, until one is
ready. How many replicas a service wants is the KPA's (``autoscale.scaler``), which ones are
added, drained and stopped the pure decider's (``autoscale.scale_plan``): this module reads
before and applies after. The SLO feedback (``autoscale.slo_feedback``) judges each minute
when its sample is written and raises the KPA's headroom and the engines kept warm from the
service's violating minutes; a new leader re-judges the samples of the last two days.
Replicas are jobs, so the scheduler places, preempts and meters them like any job of the
tenant.
"""

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from gpupool.autoscale.reading import Reading
from gpupool.autoscale.scale_plan import plan_scale, shrinks
from gpupool.autoscale.scaler import ScalerState, decide, judge_minute, new_state
from gpupool.autoscale.slo_feedback import WINDOW_MIN, SloFeedback, kept_warm
from gpupool.autoscale.warm_plan import asleep, plan_warm
from gpupool.replicas.probe_pool import ProbePool, Target
from gpupool.scheduler.reasons import Wait
from gpupool.server.advisory import Proposed, advisory_actions, gate
from gpupool.server.db.engine import Database
from gpupool.server.db.tables import JobRow, ServiceReplicaRow, ServiceRow, ServiceSampleRow
from gpupool.server.fence import hold_lead
from gpupool.server.lifecycle import TERMINAL
from gpupool.server.services.predict import MAX_HISTORY_S, live_forecast
from gpupool.server.services.replicas import (
    Replica,
    add_replica,
    read_replicas,
    replica_utilisation,
    stop_replica,
)
from gpupool.server.settings import Settings

log = logging.getLogger("gpupool.services")
SAMPLE_S = 60.0
PROBE_WAIT_S = 1.0  # longest a pass waits for its checks (the rest come with a later pass)
STALE_MIN_S = 10.0  # no reading from a replica's agent for this long: a failed check
FAILED_ENDS = ("failed", "succeeded")  # a server that exits, or never started, failed
FEEDBACK_HISTORY_S = 2 * WINDOW_MIN * 60.0  # samples a new leader re-judges (two days)
KEEP_SAMPLES_S = 15 * 86_400  # two weeks of history for the forecaster, and a day more
PRUNE_EVERY_S = 3600.0


@dataclass
class Plan:
    """What one pass decided for one service."""

    desired: int
    load: float | None
    forecast: float | None
    status: str


def adopt_copy(s: Session, row: ServiceReplicaRow, r: Replica) -> Replica | None:
    """A replica that was moved ended once its copy (make-before-break, the same command
    and environment on another node) ran: the copy becomes the replica. A copy made with
    its replica row (``server.replacements``) is one already: nothing to adopt."""
    found = s.execute(
        select(JobRow.id, JobRow.state, JobRow.started_at).where(
            JobRow.replaces == r.job_id, JobRow.state.not_in(TERMINAL)
        )
    ).first()
    if found is None or s.get(ServiceReplicaRow, found.id) is not None:
        return None
    s.flush()  # the old row goes before its port is taken again
    s.add(ServiceReplicaRow(job_id=found.id, service_id=row.service_id, port=None,
                            ready=False, failures=0))  # fmt: skip
    return Replica(found.id, row.service_id, found.state, None, None, None, False, None, 0,
                   None, found.started_at)  # fmt: skip


def agents_readings(replicas: list[Replica], now: float, stale_s: float) -> dict[int, Reading]:
    """The readings agents sent since the last pass took one, for the running replicas
    their nodes' agents look at (``services.readings``); a replica whose agent has sent
    none for ``stale_s`` is read as failing (its node may be cut off: the replica may be
    unreachable too)."""
    out: dict[int, Reading] = {}
    for r in replicas:
        if r.legacy or r.state != "running" or asleep(r):
            continue
        if r.read is not None and (r.checked_at is None or (r.read.at or 0) > r.checked_at):
            out[r.job_id] = r.read
            continue
        last = (r.read.at or 0.0) if r.read is not None else 0.0
        since = max(last, r.started_at or 0.0, r.wake_at or 0.0)
        if since and now - since > stale_s:
            where = f" on {r.node}" if r.node else ""
            out[r.job_id] = Reading(
                ready=False, error=f"no reading from its agent{where} for {now - since:.0f} s"
            )
    return out


class ServiceReconciler:
    def __init__(
        self,
        db: Database,
        settings: Settings,
        wake_scheduler: Callable[[], None] = lambda: None,
        epoch: Callable[[], int | None] = lambda: None,
    ):
        """``epoch``: the lead this process holds now; every write is fenced on it."""
        self.epoch = epoch
        self.db = db
        self.settings = settings
        self.wake_scheduler = wake_scheduler  # parks and wakes are the next cycle's
        self.states: dict[int, ScalerState] = {}
        self._at = float("-inf")
        self._sampled: dict[int, float] = {}
        self._forecasts: dict[int, tuple[float, tuple[float | None, str]]] = {}
        self._pruned = float("-inf")
        # replicas on nodes whose agents do not look at them (older agents): probed here
        self.probes = ProbePool(
            settings.service_probe_timeout_s, settings.service_probes_per_tenant
        )
        self.stale_s = max(STALE_MIN_S, 3 * settings.service_interval_s)

    def step(self, now: float | None = None, *, force: bool = False) -> None:
        """One pass, at most once a ``service_interval_s`` unless forced."""
        now = time.time() if now is None else now
        if not force and now - self._at < self.settings.service_interval_s:
            return
        self._at = now
        with self.db.read() as s:
            services = list(s.execute(select(ServiceRow)).scalars())
            for svc in services:
                s.expunge(svc)
            replicas = read_replicas(s, [svc.id for svc in services])
        if not services:  # nothing to check: no write transaction either
            self.states.clear()
            return
        by_id = {svc.id: svc for svc in services}
        targets = {  # a parked replica sleeps: nothing to read until it is woken
            r.job_id: Target(
                by_id[r.service_id].tenant,
                r.endpoint,
                by_id[r.service_id].health_path,
                sleepy=by_id[r.service_id].warm > 0,
            )
            for r in replicas
            if r.legacy and r.state == "running" and r.endpoint is not None and not asleep(r)
        }
        wait = min(PROBE_WAIT_S, 3 * self.settings.service_probe_timeout_s)
        readings = self.probes.round(targets, wait) if targets else {}
        readings |= agents_readings(replicas, now, self.stale_s)
        by_util = [svc.id for svc in services if svc.metric == "gpu_util"]
        if by_util:
            with self.db.read() as s:
                jobs = [
                    r.job_id for r in replicas if r.service_id in by_util and r.job_id in readings
                ]
                for job_id, util in replica_utilisation(s, jobs, now).items():
                    readings[job_id].gpu_util = util
        with self.db.write() as s:
            hold_lead(s, self.epoch())  # a server that lost the lead adds and stops nothing
            for svc in services:
                mine = [r for r in replicas if r.service_id == svc.id]
                self._service(s, svc, mine, readings, now)
            if now - self._pruned >= PRUNE_EVERY_S:  # samples older than the forecaster reads
                self._pruned = now
                s.execute(
                    delete(ServiceSampleRow).where(ServiceSampleRow.time < now - KEEP_SAMPLES_S)
                )
        for gone in set(self.states) - {svc.id for svc in services}:
            del self.states[gone]

    # -- one service ---------------------------------------------------------------------
    def _service(
        self, s: Session, svc: ServiceRow, mine: list[Replica], readings: dict, now: float
    ) -> None:
        row = s.get(ServiceRow, svc.id)
        if row is None:  # deleted meanwhile
            return
        checked = self._health(s, row, mine, readings, now)
        # copies taking over from a replica still there (make-before-break) are not counted
        # yet: the replica they replace is, until it ends
        there = {r.job_id for r in checked}
        live = [r for r in checked if r.replaces not in there]
        plan = self._plan(s, row, live, readings, now)
        self._scale(s, row, live, readings, plan.desired, now)
        row.desired = plan.desired
        row.status = plan.status
        if now - self._sampled.get(row.id, float("-inf")) >= SAMPLE_S and plan.load is not None:
            self._sampled[row.id] = now
            ready = sum(1 for r in live if r.ready and r.draining_since is None)
            judge_minute(self.states[row.id], plan.load, ready)  # the minute's SLO verdict
            s.add(ServiceSampleRow(service_id=row.id, time=now, load=plan.load, ready=ready,
                                   desired=plan.desired, forecast=plan.forecast))  # fmt: skip

    def _health(
        self, s: Session, svc: ServiceRow, mine: list[Replica], readings: dict, now: float
    ) -> list[Replica]:
        """Record what the probes found; replace failed replicas; return the live ones."""
        live = []
        for r in mine:
            row = s.get(ServiceReplicaRow, r.job_id)
            if row is None:
                continue
            if r.state in TERMINAL:
                s.delete(row)  # the job ended (failed, preempted, cancelled): replaced below
                copy = adopt_copy(s, row, r)
                if copy is not None:
                    live.append(copy)
                elif r.state in FAILED_ENDS and r.draining_since is None:
                    self._failure(svc, now, f"replica job {r.job_id} {r.state}: {r.reason}")
                continue
            reading: Reading | None = readings.get(r.job_id)
            row.endpoint = r.endpoint
            if asleep(r):  # parked, or parking: out of the endpoints, its health not read
                row.ready = r.ready = False
                live.append(r)
                continue
            if reading is not None:
                row.checked_at = now if reading.at is None else reading.at
                if reading.ready:
                    row.ready, row.failures = row.draining_since is None, 0
                    row.ready_at = row.ready_at or now
                    if row.wake_at is not None and not row.parked:  # woken: how long it took
                        row.woke_in_s, row.wake_at = now - row.wake_at, None
                        r.wake_at, r.woke_in_s = None, row.woke_in_s
                        log.info("service %s: replica %s woke in %.2f s", svc.name, r.job_id,
                                 row.woke_in_s)  # fmt: skip
                    svc.failures_in_row, svc.retry_at, svc.last_failure = 0, None, ""
                else:
                    row.failures += 1
                    row.ready = False
            elif r.state != "running":
                row.ready = False
            r.ready, r.failures, r.ready_at = row.ready, row.failures, row.ready_at
            if self._failed(svc, r, now):
                why = reading.error if reading is not None else "no answer"
                if r.ready_at is None:
                    why = f"not ready {self._patience(svc):.0f} s after it started; {why}"
                stop_replica(s, r.job_id, now, f"replaced: the replica failed its health "
                             f"checks ({why})")  # fmt: skip
                self._failure(svc, now, f"replica job {r.job_id} failed its health checks ({why})")
                continue
            live.append(r)
        return live

    def _failed(self, svc: ServiceRow, r: Replica, now: float) -> bool:
        if r.draining_since is not None:
            return False
        if r.ready_at is not None:
            return r.failures >= self.settings.service_failures
        if r.wake_at is not None:
            return False  # a wake has its own limit (autoscale.warm_plan)
        started = r.started_at
        return started is not None and now - started > self._patience(svc)

    @staticmethod
    def _patience(svc: ServiceRow) -> float:
        """How long a replica may take to become ready: twice the start-up time the service
        declared, at least that + 30 s (at most two hours: ``startup_s`` is at most one)."""
        return max(2 * svc.startup_s, svc.startup_s + 30)

    def _failure(self, svc: ServiceRow, now: float, why: str) -> None:
        """One more replica failed in a row: the next replacement waits (doubling)."""
        st = self.settings
        svc.failures_in_row = (svc.failures_in_row or 0) + 1
        delay = min(st.service_backoff_max_s, st.service_backoff_s * 2 ** (svc.failures_in_row - 1))
        svc.retry_at = now + delay
        svc.last_failure = why[:1000]

    def _plan(
        self, s: Session, svc: ServiceRow, live: list[Replica], readings: dict, now: float
    ) -> Plan:
        key = (svc.metric, svc.target, svc.utilisation, svc.stable_s, svc.scale_down_delay_s)
        state = self.states.get(svc.id)
        if state is None or state.settings != key:
            state = self.states[svc.id] = new_state(*key)
            self._rejudge(s, svc, state, now)
        serving = [r for r in live if r.draining_since is None and not asleep(r)]
        ready = sum(1 for r in serving if r.ready)
        mine = {r.job_id: readings[r.job_id] for r in serving if r.job_id in readings}
        load = state.load(svc.metric, svc.target, mine, now)
        if svc.pinned is not None:
            return Plan(svc.pinned, load, None, f"pinned at {svc.pinned} replicas")
        forecast, note = None, "reactive"
        if svc.policy == "predictive":
            forecast, note = self._forecast(s, svc, now)
        desired = decide(
            state, load, now, ready, len(serving) - ready, (svc.min_replicas, svc.max_replicas),
            forecast,
        )  # fmt: skip
        shown = "no load reading yet" if load is None else f"load {load:.3g} {svc.metric}"
        status = f"{note}; {shown}; {ready} ready of {desired}"
        if svc.retry_at is not None and svc.retry_at > now:
            status += (f"; {svc.failures_in_row} replica(s) failed in a row, the next starts in "
                       f"{svc.retry_at - now:.0f} s (last: {svc.last_failure})")  # fmt: skip
        fb = state.feedback
        if fb.raised > 1.0:
            status += (f"; SLO feedback: headroom x{fb.raised:.2f}, "
                       f"{fb.spent:.1f} violating minutes in about a day")  # fmt: skip
        parked = sum(1 for r in live if asleep(r))
        if parked:
            status += f"; {parked} parked (warm {self._warm(svc)})"
        waking = [r for r in live if r.wake_at is not None]
        if waking and waking[0].wait_code == Wait.WAKING:
            status += f"; {waking[0].reason}"  # why the card is not taken back yet
        waiting = [r for r in serving if r.state == "pending"]
        if waiting:  # why the pool does not give them cards (quota, room, a budget)
            status += f"; {len(waiting)} waiting: {waiting[0].reason}"
        return Plan(desired, load, forecast, status)

    def _rejudge(self, s: Session, svc: ServiceRow, state: ScalerState, now: float) -> None:
        """A fresh state (a new leader, changed settings): the SLO feedback re-judges the
        minutes the service's samples kept, so it goes on where it was."""
        state.feedback = SloFeedback(self.settings.service_slo_budget)
        rows = s.execute(
            select(ServiceSampleRow.load, ServiceSampleRow.ready)
            .where(ServiceSampleRow.service_id == svc.id,
                   ServiceSampleRow.time >= now - FEEDBACK_HISTORY_S)
            .order_by(ServiceSampleRow.time)
        ).all()  # fmt: skip
        for load, ready in rows:
            judge_minute(state, load, ready)

    def _warm(self, svc: ServiceRow) -> int:
        """Engines kept: the declared ``warm`` grown with the SLO feedback's headroom."""
        state = self.states.get(svc.id)
        raised = 1.0 if state is None else state.feedback.raised
        return kept_warm(svc.warm, raised, svc.max_replicas)

    def _forecast(self, s: Session, svc: ServiceRow, now: float) -> tuple[float | None, str]:
        """Recomputed once a sample interval (a minute): the history changes no faster."""
        cached = self._forecasts.get(svc.id)
        if cached is not None and now - cached[0] < SAMPLE_S:
            return cached[1]
        rows = s.execute(
            select(ServiceSampleRow.time, ServiceSampleRow.load, ServiceSampleRow.forecast)
            .where(ServiceSampleRow.service_id == svc.id,
                   ServiceSampleRow.time >= now - MAX_HISTORY_S)
            .order_by(ServiceSampleRow.time)
        ).all()  # fmt: skip
        times = np.array([r[0] for r in rows], dtype=float)
        loads = np.array([r[1] for r in rows], dtype=float)
        past = np.array([np.nan if r[2] is None else r[2] for r in rows], dtype=float)
        result = live_forecast(times, loads, past, svc.startup_s)
        self._forecasts[svc.id] = (now, result)
        return result

    def _may_scale_in(self, s: Session, svc: ServiceRow, have: int, want: int, now: float) -> bool:
        """Advisory mode's say on a scale-in (``scale-in``)."""
        what = Proposed(
            reason=f"service {svc.name}: the autoscaler wants {want} replicas",
            gain=f"{have - want} replica(s) and their cards freed",
            detail={"service": svc.name, "from": have, "to": want},
            tenant=svc.tenant,
        )
        subject = f"service {svc.name}: {have} -> {want} replicas"
        ttl = self.settings.proposal_ttl_s
        return gate(s, advisory_actions(s), "scale-in", subject, now, ttl, lambda: what) is None

    def _scale(
        self, s: Session, svc: ServiceRow, live: list[Replica], readings: dict[int, Reading],
        want: int, now: float,
    ) -> None:  # fmt: skip
        """Apply the scaling step the pure decider (``autoscale.scale_plan``) chose."""
        if svc.warm or any(r.parked or r.park_at or r.wake_at for r in live):
            self._scale_warm(s, svc, live, readings, want, now)
            return
        have = sum(1 for r in live if r.draining_since is None)
        decision = plan_scale(
            live,
            {job: reading.in_flight for job, reading in readings.items()},
            want,
            now,
            service=svc.name,
            drain_s=self.settings.service_drain_s,
            backing_off=svc.retry_at is not None and svc.retry_at > now,
            may_scale_in=not shrinks(live, want) or self._may_scale_in(s, svc, have, want, now),
        )
        for _ in range(decision.add):
            add_replica(s, svc, now)
        by_job = {r.job_id: r for r in live}
        for job_id in decision.drain:
            row = s.get(ServiceReplicaRow, job_id)
            assert row is not None  # read from these rows in this transaction
            row.draining_since, row.ready = now, False
            by_job[job_id].draining_since = now  # no longer serving in this pass's sample
        for job_id, why in decision.stop:
            stop_replica(s, job_id, now, why)

    def _scale_warm(
        self, s: Session, svc: ServiceRow, live: list[Replica], readings: dict[int, Reading],
        want: int, now: float,
    ) -> None:  # fmt: skip
        """Apply the step ``autoscale.warm_plan`` chose for a service that keeps engines."""
        serving = [r for r in live if r.draining_since is None and not asleep(r)]
        decision = plan_warm(
            live,
            {job: reading.in_flight for job, reading in readings.items()},
            want,
            now,
            service=svc.name,
            warm=self._warm(svc),
            drain_s=self.settings.service_drain_s,
            wake_timeout_s=max(30.0, svc.startup_s),
            backing_off=svc.retry_at is not None and svc.retry_at > now,
            may_scale_in=len(serving) <= want
            or self._may_scale_in(s, svc, len(serving), want, now),
        )
        for _ in range(decision.add):
            add_replica(s, svc, now)
        rows = {r.job_id: s.get(ServiceReplicaRow, r.job_id) for r in live}
        for job_id in decision.drain:
            row = rows[job_id]
            assert row is not None  # read from these rows in this transaction
            row.draining_since, row.ready = now, False
        for job_id in decision.park:  # the scheduler lends its card at its next cycle
            row = rows[job_id]
            assert row is not None
            row.draining_since, row.park_at, row.ready = None, now, False
        for job_id in decision.unpark:
            row = rows[job_id]
            assert row is not None
            row.park_at = None
        for job_id in decision.wake:  # the scheduler takes its card back, the agent wakes it
            row = rows[job_id]
            assert row is not None
            row.wake_at, row.ready, row.ready_at, row.failures = now, False, None, 0
        for job_id, why in decision.stop:
            stop_replica(s, job_id, now, why)
        if decision.park or decision.wake:
            self.wake_scheduler()
