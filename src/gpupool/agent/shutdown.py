"""An agent on its way out (embedded agents: ``gpupool up``, Ctrl-C): every workload stopped
— TERM, KILL after the grace — and reaped; the next start reports them ``lost``, so their
jobs are requeued rather than failed. Their records stay; their working folders go."""

import logging
import time
from collections.abc import Callable
from typing import Any

from gpupool.agent import processes as proc
from gpupool.agent.state import Record, Store
from gpupool.agent.workloads import LaunchError

log = logging.getLogger("gpupool.agent")


def stop_all(
    records: dict[int, Record], store: Store, running: Callable[[Record], bool], grace_s: float
) -> None:
    for rec in records.values():
        rec.shutdown = True
        store.save(rec)
        proc.signal_group(rec.pid, proc.TERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(running(r) for r in records.values()):
        time.sleep(0.05)
    for rec in records.values():
        if running(rec):
            proc.signal_group(rec.pid, proc.KILL)
    # reap what was killed: a TERM that came while a shim was still starting its command
    # is lost, and a killed shim must not linger as a zombie of this process
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline and any(running(r) for r in records.values()):
        time.sleep(0.02)


def remove_workdirs(
    records: dict[int, Record],
    store: Store,
    running: Callable[[Record], bool],
    cleanup: Callable[[str, list, list], object],
) -> None:
    """The working folders of the workloads ``stop_all`` stopped (after Ctrl-C, empty
    ``alloc-N-...`` folders no start removed)."""
    for rec in records.values():
        if not rec.workdir or running(rec):
            continue
        try:
            cleanup(rec.workdir, [], [])
        except (OSError, LaunchError) as exc:
            log.warning("folder of allocation %s: %s", rec.alloc_id, exc)
            continue
        rec.workdir = ""
        store.save(rec)


def leave(agent: Any) -> None:
    """What an agent does as its loop ends (``Agent.run``): its channel closed; with
    ``stop_workloads_on_exit`` (embedded agents) every workload stopped and its folders,
    cgroups and namespaces removed; its clients closed and its state dir let go."""
    if agent.channel is not None:
        agent.channel.close()
    agent.sessions.stop_all()  # its terminals are told and hung up
    if agent.config.stop_workloads_on_exit:
        agent.stop_all()
        agent.remove_stopped_workdirs()
        agent.launcher.cgroups.remove_all()  # nothing runs in them any more
        if agent.launcher.networks is not None:
            agent.launcher.networks.remove_all()
    agent.api.close()
    agent.replica_client.close()
    agent.store.unlock()
