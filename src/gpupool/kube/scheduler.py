"""The Kubernetes-mode scheduler loop: watched nodes and pods -> ``decide`` -> the API server.

A single pod is bound in one call: the Binding carries the grant annotation, which the API
server copies onto the pod. A gang's pods get their grants first and are bound after, so a
scheduler stopped half-way finishes the gang on the same nodes when it comes back (``decide``).
Pods just bound are *assumed* bound until the watch shows it, so the next cycle never places
them twice. Why a pod waits goes to an Event and the PodScheduled condition, once per change.
"""

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from gpupool.kube.api import ApiError, KubeApi
from gpupool.kube.config import KubeConfig
from gpupool.kube.decide import Bind, Decision, Evict, Memo, decide
from gpupool.kube.dra.pod_claims import with_claims
from gpupool.kube.dra.publish import V1, DraWriter
from gpupool.kube.events import COMPONENT, event_body, now_iso
from gpupool.kube.grants import GrantKey, UnsignedGrant, grant_of
from gpupool.kube.left_out import LeftOut, changes, node_event
from gpupool.kube.pod_groups import PodGroups
from gpupool.kube.pods import is_terminal, node_of, pod_key
from gpupool.kube.policy import Policy
from gpupool.kube.suspended_jobs import SuspendedJobs
from gpupool.kube.watch import Reflector, object_key
from gpupool.model import Node, SpecError

log = logging.getLogger(__name__)
GATED = "SchedulingGated"  # the PodScheduled reason of a pod with spec.schedulingGates
HELD_RETRY_S = 2.0  # a cycle again this soon while gang pods wait for their PodGroup
RESYNC_S = 30.0  # a full cycle at least this often even when no event asks for one
ASSUME_S = 30.0  # an assumed binding the watch never confirmed is dropped after this
RETRY_S = (1.0, 10.0)  # a failed binding is tried again after 1 s, doubling to 10 s
PUBLISH_S = 5.0  # DRA: nodes' ResourceSlices compared (and written if changed) this often
CLAIMS = f"{V1}/resourceclaims"
MAX_NOTES_PER_CYCLE = 500  # Event + condition writes per cycle; the rest wait for the next


class KubeScheduler:
    def __init__(
        self,
        api: KubeApi,
        config: KubeConfig,
        key: GrantKey,
        identity: str = COMPONENT,
        is_leader: Callable[[], bool] = lambda: True,
    ):
        self.api = api
        self.config = config
        self.key = key
        self.identity = identity
        self.is_leader = is_leader
        self.changed = threading.Event()
        self.nodes = Reflector(api, "/api/v1/nodes", lambda: None, on_event=self._wake_if_waiting)
        self.pods = Reflector(api, "/api/v1/pods", lambda: None, on_event=self._pod_event)
        # DRA (config.dra): claims watched, slices and allocations written (kube.dra)
        self.claims = (
            Reflector(api, CLAIMS, lambda: None, on_event=self._wake_if_waiting)
            if config.dra
            else None
        )
        self.dra = DraWriter(api) if config.dra else None
        self._published_at = -PUBLISH_S
        self._moves: deque[float] = deque()  # when each defragmentation move was made
        # pod -> (node, grant annotations, when)
        self.assumed: dict[str, tuple[str, Mapping[str, str], float]] = {}
        self.pending: set[str] = set()  # our pods the watch shows unbound
        self.preempted: dict[str, str] = {}  # UID of a pod deleted by preemption -> why
        self.noted: dict[str, str] = {}  # pod -> the reason last written to it
        self.left_out: dict[str, LeftOut] = {}  # node -> why it is left out, as last said
        self._bound_ok: dict[str, str] = {}  # pod -> UID, bound by this scheduler
        self.stats = {"cycles": 0, "binds": 0, "bind_errors": 0, "evictions": 0, "notes": 0}
        self.cycle_s = 0.0
        self.memo = Memo()
        # tenants and classes; with tenants_from: server, None until the server's are read
        self.policy: Policy | None = (
            Policy.from_config(config) if config.tenants_from == "config" else None
        )
        self._inflight = 0  # bindings submitted and not finished
        self._retry_at: float | None = None  # when a cycle tries failed bindings again
        self._retry_s = RETRY_S[0]
        self._idle = threading.Condition()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._pool = ThreadPoolExecutor(config.bind_workers, thread_name_prefix="gpupool-bind")
        self.jobs = SuspendedJobs(api, config, identity, is_leader)
        self.groups = PodGroups(api, config, identity, on_change=self._group_changed)

    # -- lifecycle -----------------------------------------------------------------------
    def start(self) -> None:
        for name, target in (
            ("nodes", lambda: self.nodes.run(self._stop)),
            ("pods", lambda: self.pods.run(self._stop)),
            *([("claims", lambda: claims.run(self._stop))] if (claims := self.claims) else []),
            ("loop", self._loop),
            ("jobs", lambda: self.jobs.run(self._stop)),
            ("podgroups", lambda: self.groups.run(self._stop)),
        ):
            t = threading.Thread(target=target, name=f"gpupool-kube-{name}", daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self, timeout_s: float = 10.0) -> None:
        """Stop watching and scheduling; the client is closed only once no thread of ours
        can read from it (a socket closed under a reader is a number the next one reuses)."""
        self._stop.set()
        self.changed.set()
        self.api.end_watches()
        deadline = time.monotonic() + timeout_s
        for t in self._threads:
            t.join(timeout=max(0.0, deadline - time.monotonic()))
        self._pool.shutdown(wait=True, cancel_futures=True)
        if any(t.is_alive() for t in self._threads):
            log.warning("kubernetes scheduler: a thread did not stop; its client is left open")
            return
        self.api.close()

    def _pod_event(self, kind: str, pod: dict[str, Any]) -> None:
        """Wake the loop for what can change a decision: a pod to place, or — while pods
        wait — room freed or a binding not ours. Our own bindings' confirmations, and pods
        coming and going while none waits, change nothing."""
        spec = pod.get("spec") or {}
        key = pod_key(pod)
        if kind == "DELETED" or is_terminal(pod):
            self.pending.discard(key)
            if self.pending:
                self.changed.set()
        elif not spec.get("nodeName"):
            if spec.get("schedulerName") == self.config.scheduler_name:
                self.pending.add(key)
                self.changed.set()
        else:
            self.pending.discard(key)
            if kind == "MODIFIED" and key not in self.assumed and self.pending:
                self.changed.set()
            elif spec.get("schedulerName") == self.config.scheduler_name and self._forged(pod):
                self.changed.set()  # evicted now, not at the next resync

    def _forged(self, pod: dict[str, Any]) -> bool:
        try:
            grant_of(pod, self.key)
            return False
        except UnsignedGrant:
            return True
        except SpecError:
            return False

    def _group_changed(self) -> None:
        """A PodGroup came, changed or went: its gang is decided now, not at the resync."""
        if self.pending:
            self.changed.set()

    def _wake_if_waiting(self, kind: str, obj: dict[str, Any]) -> None:
        """A node or claim changed: it can change a decision only while pods wait."""
        if self.pending:  # kubelets' status updates need no cycle while nothing waits
            self.changed.set()

    def set_policy(self, policy: Policy) -> None:
        """New tenants and classes (the server's); the next cycle decides with them."""
        changed = policy != self.policy
        self.policy = policy
        if changed:
            self.changed.set()

    def wait_synced(self, timeout_s: float) -> bool:
        return (
            self.nodes.synced.wait(timeout_s)
            and self.pods.synced.wait(timeout_s)
            and (self.claims is None or self.claims.synced.wait(timeout_s))
        )

    def _loop(self) -> None:
        while not self._stop.is_set() and not self.wait_synced(1.0):
            pass
        last, was_leader = 0.0, False
        while not self._stop.is_set():
            woke = self.changed.wait(self.config.cycle_s)
            self.changed.clear()
            if self._stop.is_set() or not self.is_leader() or self.policy is None:
                was_leader = False
                continue
            now = time.monotonic()
            retry = self._retry_at is not None and now >= self._retry_at
            due = woke or retry or not was_leader or now - last >= RESYNC_S
            was_leader = True
            if not due:
                continue
            self._wait_binds(self.config.bind_workers)
            last, self._retry_at = time.monotonic(), None
            try:
                self.run_cycle()
            except Exception:  # one bad cycle must not end scheduling; say why and go on
                log.exception("kubernetes scheduling cycle failed")
                self._stop.wait(1.0)

    # -- one cycle -------------------------------------------------------------------------
    def pod_view(self) -> list[dict[str, Any]]:
        """Watched pods, with bindings made but not yet seen on the watch applied."""
        pods = self.pods.snapshot()
        if not self.assumed:
            return pods
        now = time.monotonic()
        out = []
        for pod in pods:
            key = pod_key(pod)
            assumed = self.assumed.get(key)
            if assumed is not None:
                if node_of(pod) or now - assumed[2] > ASSUME_S:
                    self.assumed.pop(key, None)
                else:
                    node, granted, _ = assumed
                    meta = dict(pod.get("metadata") or {})
                    meta["annotations"] = {**(meta.get("annotations") or {}), **granted}
                    pod = {
                        **pod,
                        "metadata": meta,
                        "spec": {**(pod.get("spec") or {}), "nodeName": node},
                    }
            out.append(pod)
        return out

    def _defrag_budget(self) -> int:
        """Moves defragmentation may still make this hour (``defrag_moves_per_hour``)."""
        now = time.monotonic()
        while self._moves and self._moves[0] <= now - 3600:
            self._moves.popleft()
        return max(0, self.config.defrag_moves_per_hour - len(self._moves))

    def reported_pods(self) -> list[dict[str, Any]]:
        """The watched pods as the server's ledger records them: a pod asking through a
        ResourceClaim carries its claim's request (as the engine read it), so the job the
        server shows says what it holds."""
        pods = self.pods.snapshot()
        if self.claims is None:
            return pods
        claims = {object_key(c): c for c in self.claims.snapshot()}
        claimed = with_claims(
            [p for p in pods if (p.get("spec") or {}).get("resourceClaims")], claims
        )
        read = {pod_key(p): p for p in claimed.pods}
        return [dict(read.get(pod_key(p), p)) for p in pods]

    def run_cycle(self) -> Decision:
        started = time.perf_counter()
        pods = self.pod_view()
        claims = None
        if self.claims is not None:
            claims = {object_key(c): c for c in self.claims.snapshot()}
        decision = decide(
            self.nodes.snapshot(),
            pods,
            self.config,
            time.time(),
            self.memo,
            self.policy,
            key=self.key,
            groups=self.groups.sizes(),
            claims=claims,
            defrag_moves=self._defrag_budget(),
        )
        self._moves.extend([time.monotonic()] * decision.moves)
        if self.dra is not None and claims is not None:
            self._dra_housekeeping(pods, claims, decision.nodes)
        if decision.held:  # gang pods whose PodGroup is on its way: decided again soon
            soon = time.monotonic() + HELD_RETRY_S
            self._retry_at = min(self._retry_at or soon, soon)
        self._bind(decision.binds)
        for ev in decision.evictions:
            self._pool.submit(self._evict, ev)
        live = {pod_key(p) for p in pods}
        self._note(decision, live)
        self._report_left_out(decision.node_problems)
        self.pending &= live  # forget pods a relist dropped without a DELETED event
        self.stats["cycles"] += 1
        self.cycle_s += time.perf_counter() - started
        return decision

    def _bind(self, binds: list[Bind]) -> None:
        if not binds:
            return
        now = time.monotonic()
        for b in binds:
            self.assumed[b.pod] = (b.node, b.annotations, now)
        # in flight while the next cycle runs: the assumed bindings keep it from placing twice
        for b in binds:
            if not b.gang:
                self._submit_bind(b)
        gangs = [b for b in binds if b.gang]
        if gangs:
            self._pool.submit(self._bind_gangs, gangs)

    def _bind_gangs(self, gangs: list[Bind]) -> None:
        """Grants first, on every pod of the cycle's gangs, then the bindings."""
        written = {self._write_grant(b) for b in gangs}
        for b in gangs:
            if b.pod in written:
                self._submit_bind(b)
            else:
                self._failed(b)

    def _submit_bind(self, b: Bind) -> None:
        with self._idle:
            self._inflight += 1
        self._pool.submit(self._bind_counted, b)

    def _bind_counted(self, b: Bind) -> None:
        try:
            self._bind_one(b)
        finally:
            with self._idle:
                self._inflight -= 1
                self._idle.notify_all()

    def _wait_binds(self, at_most: int, timeout_s: float = 30.0) -> None:
        """Let bindings drain before deciding again: a cycle while thousands are queued
        would only compete with them for the interpreter."""
        with self._idle:
            self._idle.wait_for(lambda: self._inflight <= at_most, timeout_s)

    def _write_grant(self, b: Bind) -> str | None:
        ns, name = b.pod.split("/", 1)
        try:
            self.api.annotate_pod(ns, name, dict(b.annotations), b.uid)
            return b.pod
        except Exception as exc:
            log.warning("pod %s: grant not written: %s", b.pod, exc)
            self.stats["bind_errors"] += 1
            return None

    def _dra_housekeeping(
        self,
        pods: list[dict[str, Any]],
        claims: Mapping[str, Mapping[str, Any]],
        nodes: list[Node],
    ) -> None:
        """Slices when nodes changed (at most every PUBLISH_S), claims of pods gone released."""
        assert self.dra is not None
        now = time.monotonic()
        try:
            if now - self._published_at >= PUBLISH_S:
                self._published_at = now
                self.dra.ensure_classes()
                self.dra.publish(nodes)
            live = {str((p.get("metadata") or {}).get("uid")) for p in pods if not is_terminal(p)}
            self.dra.release(claims.values(), live)
        except Exception as exc:  # the API away: tried again next cycle
            log.warning("dra: %s", exc)

    def _bind_one(self, b: Bind) -> None:
        ns, name = b.pod.split("/", 1)
        if b.claim is not None and self.dra is not None and self.claims is not None:
            try:
                self.dra.allocate(b.claim, self.claims.get(f"{b.claim.namespace}/{b.claim.name}"))
            except Exception as exc:
                self._failed(b)
                self.stats["bind_errors"] += 1
                log.warning("pod %s: claim %s not allocated: %s", b.pod, b.claim.name, exc)
                return
        try:
            self.api.bind(ns, name, b.node, dict(b.annotations), b.uid)
            self.stats["binds"] += 1
            self._bound_ok[b.pod] = b.uid
            if self.noted.pop(b.pod, None) is not None:
                self._scheduled(b.pod)  # a reason in flight may land after the binding
            self._retry_s = RETRY_S[0]
        except ApiError as exc:
            if exc.status != 409:  # 409: already bound (the watch will show where)
                self._failed(b)
            self.stats["bind_errors"] += 1
            log.warning("pod %s: bind to %s failed: %s", b.pod, b.node, exc)
        except Exception as exc:
            self._failed(b)
            self.stats["bind_errors"] += 1
            log.warning("pod %s: bind to %s failed: %s", b.pod, b.node, exc)

    def _failed(self, b: Bind) -> None:
        """Forget the assumed binding and try the pod again soon: no watch event will ask
        for it (it never changed), and the next resync is up to 30 s away."""
        self.assumed.pop(b.pod, None)
        at = time.monotonic() + self._retry_s
        self._retry_at = at if self._retry_at is None else min(self._retry_at, at)
        self._retry_s = min(self._retry_s * 2, RETRY_S[1])

    def _evict(self, ev: Evict) -> None:
        ns, name = ev.pod.split("/", 1)
        uid = ((self.pods.get(ev.pod) or {}).get("metadata") or {}).get("uid")
        if uid:
            self.preempted[uid] = ev.reason
        try:
            kind = "Normal" if ev.event == "Preempted" else "Warning"
            self.event(ev.pod, ev.event, ev.reason, kind)
            self.api.delete_pod(ns, name, ev.grace_s)
            self.stats["evictions"] += 1
        except Exception as exc:
            log.warning("pod %s: eviction failed: %s", ev.pod, exc)

    def _note(self, decision: Decision, live: set[str]) -> None:
        notes = [(p, "FailedScheduling", r) for p, r in decision.waiting.items()]
        notes += [(p, "InvalidRequest", r) for p, r in decision.problems.items()]
        notes += [(p, GATED, r) for p, r in decision.gated.items()]
        fresh = [(p, why, r) for p, why, r in notes if self.noted.get(p) != r]
        for pod, why, reason in fresh[:MAX_NOTES_PER_CYCLE]:
            self.noted[pod] = reason
            self._pool.submit(self._note_one, pod, why, reason)
        if fresh[MAX_NOTES_PER_CYCLE:]:
            self.changed.set()
        for pod in [p for p in self.noted if p not in live]:
            self.noted.pop(pod, None)
        for pod in [p for p in self._bound_ok if p not in live]:
            self._bound_ok.pop(pod, None)

    def _report_left_out(self, now: Mapping[str, LeftOut]) -> None:
        """A log line and an Event on the Node for each node left out for a new reason, and a
        log line for each taken back; once per change, not every cycle."""
        new, back = changes(self.left_out, now)
        for name in back:
            log.info("node %s: no longer left out (%s)", name, self.left_out.pop(name).cause)
        for lo in new:
            log.warning("node %s left out (%s): %s", lo.node, lo.cause, lo.message)
            self.left_out[lo.node] = lo
            uid = str(((self.nodes.get(lo.node) or {}).get("metadata") or {}).get("uid") or "")
            self._pool.submit(self._node_event, lo, uid)

    def _node_event(self, lo: LeftOut, uid: str) -> None:
        try:
            self.api.create_event(node_event(lo, uid, self.identity))
        except Exception as exc:
            if self.left_out.get(lo.node) == lo:
                self.left_out.pop(lo.node, None)  # said again next cycle
            log.warning("node %s: left-out event not written: %s", lo.node, exc)

    def _note_one(self, pod: str, why: str, reason: str) -> None:
        """The pod's Warning Event and PodScheduled condition; a gated pod only the condition,
        reason SchedulingGated (as kube-scheduler writes it: waiting for a gate is no
        failure)."""
        ns, name = pod.split("/", 1)
        if self._bound_since(pod):
            return  # bound since the cycle that found it waiting
        try:
            if why != GATED:
                self.event(pod, why, reason, "Warning")
            condition = {
                "type": "PodScheduled",
                "status": "False",
                "reason": GATED if why == GATED else "Unschedulable",
                "message": reason,
                "lastTransitionTime": now_iso(),
            }
            self.api.set_pod_condition(ns, name, condition)
            self.stats["notes"] += 1
            if self._bound_since(pod):  # bound while this was written: it is scheduled
                self._scheduled(pod)
        except Exception as exc:
            self.noted.pop(pod, None)  # try again next cycle
            log.warning("pod %s: reason not written: %s", pod, exc)

    def _bound_since(self, pod: str) -> bool:
        uid = ((self.pods.get(pod) or {}).get("metadata") or {}).get("uid")
        return pod in self._bound_ok and self._bound_ok[pod] in (uid, "")

    def _scheduled(self, pod: str) -> None:
        """PodScheduled=True again (what the binding wrote) over a reason that landed after
        it: a bound pod (a CPU-only gang member bound right after its gang) kept showing
        Unschedulable."""
        ns, name = pod.split("/", 1)
        condition = {"type": "PodScheduled", "status": "True", "reason": "",
                     "message": "", "lastTransitionTime": now_iso()}  # fmt: skip
        try:
            self.api.set_pod_condition(ns, name, condition)
        except Exception as exc:
            log.warning("pod %s: PodScheduled not written: %s", pod, exc)

    def event(self, pod: str, reason: str, message: str, kind: str) -> None:
        ns, name = pod.split("/", 1)
        uid = ((self.pods.get(pod) or {}).get("metadata") or {}).get("uid", "")
        involved = {"apiVersion": "v1", "kind": "Pod", "namespace": ns, "name": name, "uid": uid}
        self.api.create_event(event_body(involved, reason, message, kind, self.identity))
