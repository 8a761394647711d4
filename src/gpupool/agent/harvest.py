"""What the agent does about workloads that ended, and the checks of their folders — the
work it does on a job's behalf where the job chose the path or filled the folder. A mixin of
``Agent``, kept apart so the agent's module stays about its orders.

Nothing a job controls runs on the agent's main loop: its ``--output`` / ``--error`` files
(written as its user, refusing what is not a regular file, within ``OUTPUT_BUDGET_S``), the
measure of its working folder against its disk limit (within ``DISK_BUDGET_S``) and the
removal of that folder all go to a ``FairPool`` where a tenant's slow paths hold up only its
own chores. Meanwhile the loop starts, stops and kills every other job as before; a job
whose outputs are still being written is reported ended once they are (its own ``--wait``
sees the file)."""

import logging
import threading
import time
from functools import partial
from typing import Any

from gpupool.agent import processes as proc
from gpupool.agent.disk import Usage, folder_usage, over_disk
from gpupool.agent.job_output import NOT_WRITTEN, OutputPlan, write_outputs
from gpupool.agent.log_shipping import ship
from gpupool.agent.outcome import outcome
from gpupool.agent.state import Record, Store
from gpupool.fair_pool import FairPool

log = logging.getLogger("gpupool.agent")
DISK_CHECK_S = 2.0  # how often working folders are measured against --disk-max
OUTPUT_BUDGET_S = 30.0  # a job's --output and --error together
DISK_BUDGET_S = 10.0  # one measure of one working folder
CHORES_PER_TENANT, CHORE_THREADS = 2, 8

Chore = tuple[str, int]  # (what, allocation id)


def chores() -> FairPool[Chore, Any]:
    return FairPool(CHORES_PER_TENANT, CHORE_THREADS, "chores")


class Harvest:
    # provided by Agent
    config: Any
    api: Any
    name: str
    store: Store
    launcher: Any
    records: dict[int, Record]
    children: dict[int, Any]
    finished: set[int]
    chores: FairPool[Chore, Any]
    _disk_checked: float
    _written: dict[int, str]  # allocation -> why its outputs were not written ("" : they were)
    _stopping: threading.Event

    def _running(self, rec: Record) -> bool:
        raise NotImplementedError

    def _begin_stop(self, rec: Record, reason: str) -> None: ...
    def _mps_in_use(self) -> set[str]:
        raise NotImplementedError

    def _collect_chores(self) -> None:
        """Take what the chores finished: outputs written, folders measured."""
        for (what, alloc_id), result in self.chores.take().items():
            rec = self.records.get(alloc_id)
            if what == "out":
                self._written[alloc_id] = result
            elif what == "disk" and rec is not None and rec.stop_sent_at is None:
                self._disk_verdict(rec, result)

    def _harvest(self) -> None:
        """Report workloads that ended and forget them once the server knows."""
        self._collect_chores()
        for alloc_id, rec in list(self.records.items()):
            if self._running(rec):
                continue
            self.children.pop(alloc_id, None)
            if not self._outputs_written(rec):
                continue  # its files are being written off the loop: reported once they are
            try:
                self._upload_logs(rec)
            except Exception as exc:  # the end is reported even when its log cannot be sent
                log.warning("agent %s: logs of allocation %s: %s", self.name, alloc_id, exc)
            # a workload that stopped itself at its lease is reported even when the server
            # has released it meanwhile (its node was cut off): the real end corrects the
            # meter, which billed it to the lease's end
            fenced = proc.note(self.store.dir(alloc_id), proc.FENCED)
            if not rec.released or fenced:
                state, code, reason = outcome(rec, self.store.dir(rec.alloc_id), self.name)
                if rec.output_note:  # in its state's reason, not only in its log
                    reason = f"{reason}; {not_written(rec)}"
                ended = proc.ended_at(self.store.dir(alloc_id))
                self.api.report(alloc_id, rec.generation, state, exit_code=code, reason=reason,
                                started_at=rec.started_at, ended_at=ended,
                                node=self.name)  # fmt: skip
            del self.records[alloc_id]
            self._written.pop(alloc_id, None)
            self.finished.add(alloc_id)
            self._clean(rec)
            self.store.remove(alloc_id)

    def _clean(self, rec: Record) -> None:
        """Its cgroups, MPS daemon and port now; its working folder (the job filled it: up
        to 200,000 files) removed off the loop."""
        replica = rec.alloc_id if rec.port is not None else None
        try:  # a leftover folder or cgroup is not worth a failed round
            self.launcher.cleanup("", rec.cgroups, rec.mps, self._mps_in_use(), replica)
        except Exception as exc:
            log.warning("agent %s: cleanup of allocation %s: %s", self.name, rec.alloc_id, exc)
        if rec.workdir:
            task = partial(self.launcher.remove_workdir, rec.workdir)
            self.chores.submit(("rm", rec.alloc_id), rec.tenant, task)

    def _outputs_written(self, rec: Record) -> bool:
        """Whether the job's --output / --error are written (or it has none); starts writing
        them, as the job's user and off the loop, the first time it is asked."""
        if not rec.outputs or rec.released:
            return True
        why = self._written.get(rec.alloc_id)
        if why is None:
            plan, folder = OutputPlan(**rec.outputs), self.store.dir(rec.alloc_id)
            task = partial(_write, plan, folder)
            self.chores.submit(("out", rec.alloc_id), rec.tenant, task)
            return False
        if why:
            with (self.store.dir(rec.alloc_id) / "stderr").open("a") as err:
                err.write(f"{NOT_WRITTEN}{why}\n")
            rec.output_note = why
        rec.outputs = None  # once: an agent that restarts now does not write them again
        self.store.save(rec)
        return True

    def _upload_logs(self, only: Record | None = None) -> None:
        """Send what the workloads printed since the last round (``log_shipping``)."""
        records = [only] if only else list(self.records.values())
        for rec in records:
            shipped = ship(self.api, self.store, rec, self.config.log_max_bytes, only is not None)
            if shipped and rec.alloc_id in self.records:
                self.store.save(rec)

    def _enforce_disk(self, now: float) -> None:
        """Every ``DISK_CHECK_S``: measure each working folder (off the loop); a workload
        over its limit is stopped when the measure comes back."""
        if now - self._disk_checked < DISK_CHECK_S:
            return
        self._disk_checked = now
        for rec in list(self.records.values()):
            limit = self.config.isolation.disk_max_mib if rec.disk_mib is None else rec.disk_mib
            if rec.stop_sent_at is not None or not rec.workdir or limit <= 0:
                continue
            task = partial(folder_usage, rec.workdir, deadline=time.monotonic() + DISK_BUDGET_S)
            self.chores.submit(("disk", rec.alloc_id), rec.tenant, task)

    def _disk_verdict(self, rec: Record, usage: Usage) -> None:
        limit = self.config.isolation.disk_max_mib if rec.disk_mib is None else rec.disk_mib
        reason = over_disk(usage, limit)
        if reason:
            log.warning("agent %s: allocation %s: %s", self.name, rec.alloc_id, reason)
            self._begin_stop(rec, reason)


def not_written(rec: Record) -> str:
    """The words a job's reason ends with when its outputs could not be written here."""
    return (
        f"--output not written: {rec.output_note} (its submitter's gpupool saves it where "
        f"it was submitted: gpupool job wait {rec.job_id})"
    )


def _write(plan: OutputPlan, folder: Any) -> str:
    try:
        return write_outputs(plan, folder, OUTPUT_BUDGET_S)
    except Exception as exc:  # a chore reports its failure, never raises
        return f"cannot write it: {type(exc).__name__}: {exc}"
