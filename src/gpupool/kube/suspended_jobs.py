"""Suspended Jobs whose pods gpupool would schedule (``spec.suspend: true``, as Kueue writes
them): a suspended Job has no pods, so without a word it would wait forever where nothing
resumes it. gpupool's stance is a setting, ``suspended_jobs``:

- ``leave`` (default): gpupool does not resume Jobs — Kueue, or whoever suspended it, does —
  and says so once per Job in an Event, naming how to resume it;
- ``admit``: gpupool is the admission: it resumes such Jobs in namespaces it maps to a tenant
  (their pods then wait in gpupool's queue under that tenant's quota) and says so in an Event.
  Not for clusters where Kueue manages the same Jobs.

Read (list the Jobs), decide (pure ``decide_jobs``), apply (patch, Events)."""

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from gpupool.kube.api import ApiError, KubeApi
from gpupool.kube.config import KubeConfig
from gpupool.kube.events import event_body

log = logging.getLogger(__name__)
CHECK_S = 5.0
JOBS = "/apis/batch/v1/jobs"


@dataclass(frozen=True)
class JobAction:
    kind: Literal["resume", "tell"]
    namespace: str
    name: str
    uid: str
    message: str


def decide_jobs(
    jobs: Iterable[Mapping[str, Any]], config: KubeConfig, told: set[str]
) -> list[JobAction]:
    """What to do about each suspended Job whose pods name gpupool as their scheduler;
    ``told``: the UIDs already given their Event (each is told once)."""
    out: list[JobAction] = []
    for job in jobs:
        meta, spec = job.get("metadata") or {}, job.get("spec") or {}
        template = (spec.get("template") or {}).get("spec") or {}
        if not spec.get("suspend") or template.get("schedulerName") != config.scheduler_name:
            continue
        if meta.get("deletionTimestamp"):
            continue  # being deleted: not to be resumed
        ns, name, uid = meta.get("namespace", ""), meta.get("name", ""), meta.get("uid", "")
        tenant = config.namespaces.get(ns)
        if config.suspended_jobs == "admit" and (tenant or config.tenants_from == "server"):
            whose = f"tenant {tenant}" if tenant else f"the tenant of namespace {ns}"
            message = (
                f"resumed by gpupool (suspended_jobs: admit): its pods wait in gpupool's queue "
                f"under {whose}'s quota"
            )
            out.append(JobAction("resume", ns, name, uid, message))
        elif uid not in told:
            if config.suspended_jobs == "admit":
                message = (
                    f"suspended, and not resumed by gpupool: namespace {ns} is no tenant's in "
                    "its settings (namespaces)"
                )
            else:
                message = (
                    "suspended: gpupool schedules this Job's pods once it is resumed, and does "
                    "not resume Jobs itself (suspended_jobs: leave) — Kueue, or `kubectl patch "
                    'job NAME -p \'{"spec":{"suspend":false}}\'`, does; or set '
                    "suspended_jobs: admit"
                )
            out.append(JobAction("tell", ns, name, uid, message))
    return out


class SuspendedJobs:
    """Every ``CHECK_S`` while leading: list the Jobs, decide, apply."""

    def __init__(
        self,
        api: KubeApi,
        config: KubeConfig,
        identity: str,
        is_leader: Callable[[], bool],
        check_s: float = CHECK_S,
    ):
        self.api, self.config, self.identity = api, config, identity
        self.is_leader, self.check_s = is_leader, check_s
        self.told: set[str] = set()
        self.resumed = 0

    def run(self, stop: threading.Event) -> None:
        while not stop.wait(self.check_s):
            if not self.is_leader():
                continue
            try:
                self.once()
            except Exception as exc:  # the API away, Jobs not readable (RBAC): said, retried
                log.warning("suspended Jobs: %s", exc)

    def once(self) -> None:
        jobs = self.api.list(JOBS).get("items") or []
        for action in decide_jobs(jobs, self.config, self.told):
            self.apply(action)

    def apply(self, action: JobAction) -> None:
        path = f"/apis/batch/v1/namespaces/{action.namespace}/jobs/{action.name}"
        if action.kind == "resume":
            try:  # the uid makes it a precondition: a Job made again under the name is not it
                body = {"metadata": {"uid": action.uid}, "spec": {"suspend": False}}
                self.api.request("PATCH", path, body, content_type="application/merge-patch+json")
            except ApiError as exc:
                log.warning("job %s/%s not resumed: %s", action.namespace, action.name, exc)
                return
            self.resumed += 1
        involved = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "namespace": action.namespace,
            "name": action.name,
            "uid": action.uid,
        }
        reason = "Resumed" if action.kind == "resume" else "Suspended"
        self.api.create_event(event_body(involved, reason, action.message, "Normal", self.identity))
        self.told.add(action.uid)
