"""One Kubernetes scheduling decision (pure): nodes and pods in, what to do out.

Pods of other schedulers bound to a node take their CPU, memory and whole cards from it
(gpupool does not know which cards, so it sets aside the node's last ones). gpupool's own bound
pods run with the grant written on them; one whose grant does not verify (a tenant changed it)
is evicted. A gang whose grants were written but only partly bound (the scheduler stopped
half-way) is finished on the same nodes, never placed twice.
"""

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, TypeVar, cast

from gpupool.kube.advertised import Advertised, Ask, advertised_masks, ask_of
from gpupool.kube.config import KubeConfig
from gpupool.kube.dra.claims import (
    ClaimWrite,
    Option,
    allocation,
    extended_claim,
)
from gpupool.kube.dra.pod_claims import (
    ClaimedPods,
    card_variants,
    choose,
    claim_holds,
    joined_masks,
    with_claims,
)
from gpupool.kube.grants import (
    GRANT_ANNOTATION,
    SIGNATURE_ANNOTATION,
    GrantKey,
    UnsignedGrant,
    grant_json,
    grant_of,
    signed,
)
from gpupool.kube.inventory import KubeNode, node_from_object
from gpupool.kube.left_out import LeftOut, waiting_note
from gpupool.kube.pod_groups import GroupSizes
from gpupool.kube.pod_resources import pod_resources
from gpupool.kube.pods import (
    PodJob,
    class_values,
    container_requests,
    gang_of,
    gated_gangs,
    granted_pct,
    group_pods,
    is_terminal,
    job_for,
    node_of,
    pod_key,
    scheduling_gates,
    uid_of,
)
from gpupool.kube.policy import Policy
from gpupool.kube.replicas import replica_size, sharing_masks
from gpupool.kube.selectors import constraints, hard_tainted, node_allows
from gpupool.model import Job, Node, SpecError
from gpupool.scheduler.cycle import CycleConfig, RunningJob, run_cycle
from gpupool.scheduler.priorities import QueuePolicy
from gpupool.scheduler.reasons import Cause, Wait
from gpupool.scheduler.state import ClusterState
from gpupool.scheduler.types import NodeGrant, Placement
from gpupool.sharing import SharePolicy


@dataclass(frozen=True, slots=True)
class Bind:
    pod: str  # namespace/name
    node: str
    annotations: Mapping[str, str]  # the grant and its signature
    action: str  # allocate, borrow, preempt, reclaim, backfill, or resume (a gang half-bound)
    gang: bool = False  # one of several pods bound together: grants are written first
    uid: str = ""  # the pod's, so a pod made since under the same name is not bound
    claim: ClaimWrite | None = None  # its ResourceClaim's allocation, written before binding


@dataclass(frozen=True, slots=True)
class Evict:
    pod: str
    reason: str
    grace_s: int
    event: str = "Preempted"  # the Event's reason


@dataclass
class Decision:
    binds: list[Bind] = field(default_factory=list)
    evictions: list[Evict] = field(default_factory=list)
    waiting: dict[str, str] = field(default_factory=dict)  # pod -> why it is not bound yet
    problems: dict[str, str] = field(default_factory=dict)  # pod -> what is wrong with it
    held: dict[str, str] = field(default_factory=dict)  # pod -> why, not written (pods.Grouped)
    # pod -> its spec.schedulingGates, said: not placed until they are removed (the API server
    # refuses to bind a gated pod)
    gated: dict[str, str] = field(default_factory=dict)
    node_problems: dict[str, LeftOut] = field(default_factory=dict)  # nodes left out, why
    moves: int = 0  # defragmentation moves decided (counted against the hour)
    # DRA: the nodes whose cards gpupool gives (its slices'): not those of device-plugin
    # replicas, whose cards NVIDIA's plugin hands out
    nodes: list[Node] = field(default_factory=list)


T = TypeVar("T")
MemoKey = tuple[object, ...]  # what is cached: ("node", name), ("job", id, first pod, parts)


class Memo:
    """Translations kept between cycles, keyed by object and version (objects from the watch
    are replaced on change, never edited), so a cycle translates only what changed. Entries
    not used in a cycle are dropped by ``sweep``."""

    def __init__(self) -> None:
        self._old: dict[MemoKey, tuple[object, object]] = {}
        self._new: dict[MemoKey, tuple[object, object]] = {}

    def get(self, key: MemoKey, version: object, compute: Callable[[], T]) -> T:
        hit = self._new.get(key) or self._old.get(key)
        if hit is not None and hit[0] == version:
            self._new[key] = hit
            return cast(T, hit[1])  # stored by this key's own compute
        value = compute()
        self._new[key] = (version, value)
        return value

    def sweep(self) -> None:
        self._old, self._new = self._new, {}


def _version(obj: Mapping[str, Any]) -> tuple[str, str]:
    """An object's version as the memo sees it: its resourceVersion, and its node (a pod
    assumed bound has the node set before the watch brings a new version)."""
    rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
    return rv, str((obj.get("spec") or {}).get("nodeName") or "")


def _cached(
    memo: "Memo | None", key: MemoKey, obj: Mapping[str, Any], compute: Callable[[], T]
) -> T:
    if memo is None or not _version(obj)[0]:
        return compute()
    return memo.get(key, _version(obj), compute)


def _try(fn: Callable[..., T], *args: object) -> T | SpecError:
    try:
        return fn(*args)
    except SpecError as exc:
        return exc


MAX_CARDS = 1 << 16  # more cards than any node has


@dataclass
class _Held:
    cpu: int = 0
    mem: int = 0
    cards: int = 0  # how many, of the node's last cards
    indices: set[int] = field(default_factory=set)  # which (ResourceClaims name them)


def _nodes(
    objs: Iterable[Mapping[str, Any]], config: KubeConfig, out: Decision, memo: "Memo | None"
) -> dict[str, KubeNode]:
    nodes: dict[str, KubeNode] = {}
    for obj in objs:
        name = str((obj.get("metadata") or {}).get("name") or "?")
        kn = _cached(memo, ("node", name), obj, partial(_try, node_from_object, obj))
        if isinstance(kn, SpecError):
            out.node_problems[name] = LeftOut.of(name, kn)
            continue
        nodes[kn.node.name] = kn
    return nodes


def _usable(kn: KubeNode, held: _Held | None) -> Node:
    node = kn.node
    if held is not None:
        devices = [
            replace(d, healthy=False) if d.index in held.indices else d for d in node.devices
        ]
        taken = 0
        for i in range(len(devices) - 1, -1, -1):
            if taken >= held.cards:
                break
            if devices[i].healthy:
                devices[i] = replace(devices[i], healthy=False)
                taken += 1
        node = replace(
            node,
            cpu_millis=max(0, node.cpu_millis - held.cpu),
            memory_mib=max(0, node.memory_mib - held.mem),
            devices=tuple(devices),
        )
    if kn.closed:
        node = replace(
            node, devices=tuple(replace(d, healthy=False) for d in node.devices), closed=kn.closed
        )
    return node


def _allowed_nodes(
    jobs: Mapping[str, PodJob],
    pods: Mapping[str, Mapping[str, Any]],
    node_objs: list[Mapping[str, Any]],
    nodes: Mapping[str, KubeNode],
    config: KubeConfig,
) -> dict[str, frozenset[str] | None]:
    """Per job whose pods are constrained (or when some node is tainted), the nodes it may
    use; computed once per distinct set of constraints (a gang's first pod speaks for it)."""
    tainted = any(hard_tainted(o, config.tolerated) for o in node_objs)
    by_constraints: dict[str, frozenset[str] | None] = {}
    out: dict[str, frozenset[str] | None] = {}
    for job_id, pj in jobs.items():
        pod = pods[pj.pods[0]]
        key = constraints(pod)
        if not key and not tainted:
            continue
        if key not in by_constraints:
            names = frozenset(
                name
                for o in node_objs
                if (name := str((o.get("metadata") or {}).get("name"))) in nodes
                and node_allows(pod, o, config.tolerated)
            )
            by_constraints[key] = None if len(names) == len(nodes) else names
        out[job_id] = by_constraints[key]
    return out


def _asks_replica(pod: Mapping[str, Any], memo: "Memo | None") -> bool:
    asked = _cached(memo, ("resources", pod_key(pod)), pod, partial(_try, pod_resources, pod))
    return not isinstance(asked, SpecError) and asked.replicas > 0


def _claimed_view(
    live: list[Mapping[str, Any]],
    ours: list[Mapping[str, Any]],
    claimed: ClaimedPods,
    out: Decision,
) -> tuple[list[Mapping[str, Any]], list[Mapping[str, Any]]]:
    """The pods with their claims read; a pending pod whose claim cannot be placed waits or
    is refused, saying why (a bound one keeps running as it is)."""
    rewritten = {pod_key(p): p for p in claimed.pods}
    by_key = {pod_key(p): p for p in ours}
    dropped = set()
    for name, why in [*claimed.problems.items(), *claimed.waiting.items()]:
        if not node_of(by_key[name]):
            dropped.add(name)
            (out.problems if name in claimed.problems else out.waiting)[name] = why
    our_keys = by_key.keys()
    view = [
        rewritten.get(pod_key(p), p) if pod_key(p) in our_keys else p
        for p in live
        if pod_key(p) not in dropped
    ]
    return view, [p for p in view if pod_key(p) in our_keys]


def _advertised(node_objs: Iterable[Mapping[str, Any]]) -> dict[str, set[str]]:
    """Per node, the resources its kubelet admits itself (a device plugin's)."""
    return {
        str((o.get("metadata") or {}).get("name")): {
            r
            for r, v in ((o.get("status") or {}).get("allocatable") or {}).items()
            if v not in (None, "0", 0)
        }
        for o in node_objs
    }


def _extended(
    pod: Mapping[str, Any], piece: NodeGrant, advertised: Mapping[str, set[str]]
) -> ClaimWrite | None:
    """The extended-resource claim of a pod asking nvidia.com/gpu or MIG instances bound
    where no device plugin advertises them (``claims.extended_claim``), so the kubelet admits
    it through DRA."""
    if not piece.devices or any(not d.exclusive and not d.mig_profile for d in piece.devices):
        return None  # a share is gpupool's device plugin's (gpupool.io/slice), never a card
    made = extended_claim(pod, piece, advertised.get(piece.node, set()))
    if made is None:
        return None
    body, status, pod_status = made
    meta = body["metadata"]
    return ClaimWrite(
        meta["namespace"], meta["name"], status, body, str(pod["metadata"]["name"]), pod_status
    )


def _fits(piece: NodeGrant, nodes: Mapping[str, KubeNode]) -> bool:
    kn = nodes.get(piece.node)
    return kn is not None and all(d.device < len(kn.node.devices) for d in piece.devices)


def _placed_gangs(pods: Iterable[Mapping[str, Any]], groups: GroupSizes | None) -> set[str]:
    """Gangs (``NS/gang/NAME``) some of whose pods are bound: their followers may go."""
    out = set()
    for pod in pods:
        if not (pod.get("spec") or {}).get("nodeName"):
            continue
        try:
            gang = gang_of(pod, groups)
        except SpecError:
            continue
        if gang is not None:
            out.add(f"{pod_key(pod).split('/', 1)[0]}/gang/{gang[0]}")
    return out


def _past_advertised(adv: Advertised, placed: list[tuple[str, Ask]]) -> str:
    """Why a job's pods placed on those nodes would pass what the nodes advertise ("" when
    they fit: then they are counted)."""
    taken: list[tuple[str, Ask]] = []
    for node, ask in placed:
        why = adv.why_not(node, ask)
        if why:
            for n, a in taken:  # a gang fits whole or not at all
                adv.untake(n, a)
            return why
        adv.take(node, ask)
        taken.append((node, ask))
    return ""


def decide(
    node_objs: Iterable[Mapping[str, Any]],
    pod_objs: Iterable[Mapping[str, Any]],
    config: KubeConfig,
    now: float,
    memo: Memo | None = None,
    policy: Policy | None = None,
    *,
    key: GrantKey,
    groups: GroupSizes | None = None,
    claims: Mapping[str, Mapping[str, Any]] | None = None,
    defrag_moves: int = 0,
) -> Decision:
    """``memo``: translations from earlier cycles (the scheduler keeps one; tests need not).
    ``policy``: tenants and classes [default: the settings file's]. ``key``: signs and checks
    grants. ``groups``: PodGroups' sizes (``kube.pod_groups``). ``claims``: ResourceClaims by
    ``namespace/name`` (``kube.dra``; None: DRA off). ``defrag_moves``: how many pods
    defragmentation may still move this hour (the scheduler counts them)."""
    rules = policy or Policy.from_config(config)
    node_objs = list(node_objs)
    out = Decision()
    nodes = _nodes(node_objs, config, out, memo)
    size, left_out = replica_size(nodes)
    out.node_problems.update(left_out)
    for name in left_out:
        del nodes[name]
    replica_pct = 100 // size if size else None
    held: dict[str, _Held] = {}
    bound: dict[str, list[tuple[str, NodeGrant, str, Mapping[str, Any]]]] = {}
    unbound: list[Mapping[str, Any]] = []
    granted_unbound: dict[str, list[tuple[str, NodeGrant, dict[str, str], str]]] = {}
    live = [p for p in pod_objs if not is_terminal(p)]
    ours = [p for p in live if (p.get("spec") or {}).get("schedulerName") == config.scheduler_name]
    claimed: ClaimedPods | None = None
    advertised: dict[str, set[str]] = {}  # DRA: per node, the resources its kubelet admits
    if claims is not None:
        claimed = with_claims(ours, claims, card_variants(nodes.values()))
        live, ours = _claimed_view(live, ours, claimed, out)
        for node_name, cards in claim_holds(claims.values(), {uid_of(p) for p in ours}).items():
            held.setdefault(node_name, _Held()).indices |= cards
        advertised = _advertised(node_objs)
        out.nodes = [kn.node for kn in nodes.values() if not kn.replicas]
    our_ids = {id(p) for p in ours}
    by_pod = {pod_key(p): p for p in ours}

    options: dict[str, Option] = {}  # claimed pods: the option they are placed by

    def claim_write(pod_name: str, piece: NodeGrant) -> ClaimWrite | None:
        if claimed is None:
            return None
        ask = claimed.asks.get(pod_name)
        join = claimed.joins.get(pod_name)
        if join is not None:
            meta = by_pod[pod_name].get("metadata") or {}
            user = {"resource": "pods", "name": meta.get("name"), "uid": meta.get("uid")}
            return ClaimWrite(join.namespace, join.name, {"reservedFor": [user]}, join=True)
        if ask is None:
            return _extended(by_pod[pod_name], piece, advertised)
        status = allocation(ask, piece, by_pod[pod_name], options.get(pod_name))
        return ClaimWrite(ask.namespace, ask.name, status)

    def hold(pod: Mapping[str, Any], every_card: bool = False) -> None:
        asks = _cached(memo, ("asks", pod_key(pod)), pod, partial(_try, container_requests, pod))
        if isinstance(asks, SpecError):
            return  # kubelet admitted it; its odd quantity is not ours to judge
        cpu, mem, cards = asks
        h = held.setdefault(node_of(pod), _Held())
        h.cpu, h.mem, h.cards = h.cpu + cpu, h.mem + mem, h.cards + cards
        if every_card:
            h.cards += MAX_CARDS

    for pod in live:
        mine = id(pod) in our_ids
        grant: tuple[str, str, NodeGrant] | None = None  # (job, signature, this pod's part)
        if mine:
            got = _cached(memo, ("grant", pod_key(pod)), pod, partial(_try, grant_of, pod, key))
            if isinstance(got, UnsignedGrant) and node_of(pod):
                # a tenant rewrote what it was given: it goes, and until it has gone the cards
                # it may use (any of the node's) are nobody else's
                if not (pod.get("metadata") or {}).get("deletionTimestamp"):
                    evict = Evict(pod_key(pod), str(got), config.grace_s, "GrantAltered")
                    out.evictions.append(evict)
                hold(pod, every_card=True)
                continue
            if not isinstance(got, SpecError):
                grant = got
        if node_of(pod):
            if grant is not None and grant[2].node == node_of(pod) and _fits(grant[2], nodes):
                bound.setdefault(grant[0], []).append((pod_key(pod), grant[2], grant[1], pod))
            else:
                hold(pod)
        elif mine and (gates := scheduling_gates(pod)):
            out.gated[pod_key(pod)] = (
                f"scheduling gated by {', '.join(gates)}: gpupool places the pod once "
                "whoever set them (Kueue, at admission) removes them"
            )
        elif mine:
            if grant is not None:
                notes = (pod.get("metadata") or {}).get("annotations", {})
                kept = {k: notes[k] for k in (GRANT_ANNOTATION, SIGNATURE_ANNOTATION)}
                member = (pod_key(pod), grant[2], kept, uid_of(pod))
                granted_unbound.setdefault(grant[0], []).append(member)
            unbound.append(pod)

    running: list[RunningJob] = []
    tree = rules.tree()
    by_job: dict[str, list[str]] = {}
    for job_id, members in bound.items():
        resumed = [m for m in granted_unbound.pop(job_id, []) if _fits(m[1], nodes)]
        for name, piece, kept, uid in resumed:
            out.binds.append(
                Bind(name, piece.node, kept, "resume", True, uid, claim_write(name, piece))
            )
        pieces = [m[1] for m in members] + [m[1] for m in resumed]
        first = members[0][3]
        job = _cached(
            memo,
            ("job", job_id, members[0][0], len(pieces)),
            first,
            partial(_try, job_for, first, job_id, config, len(pieces), granted_pct(pieces[0])),
        )
        if isinstance(job, SpecError) or job.tenant not in tree.tenants:
            for m in members:
                hold(m[3])
            continue
        placed_by = members[0][2]
        running.append(
            RunningJob(job, Placement(job_id, tuple(pieces), placed_by), job.submit_time)
        )
        by_job[job_id] = [m[0] for m in members] + [m[0] for m in resumed]
    resumed_keys = {b.pod for b in out.binds}
    pending_pods = [p for p in unbound if pod_key(p) not in resumed_keys]
    gated = gated_gangs((by_pod[k] for k in out.gated), groups)
    grouped = group_pods(
        pending_pods, config, groups, _placed_gangs(ours, groups), replica_pct, now, gated
    )
    jobs = grouped.jobs
    out.problems.update(grouped.problems)
    out.held.update(grouped.held)
    out.waiting.update(grouped.waiting)
    by_key = {pod_key(p): p for p in pending_pods}
    allowed = sharing_masks(
        jobs,
        lambda pod: _asks_replica(by_key[pod], memo),
        nodes,
        _allowed_nodes(jobs, by_key, node_objs, nodes, config),
    )
    on_nodes = [p for p in live if node_of(p)]
    engine_cards = {name: len(kn.node.devices) for name, kn in nodes.items()}

    def asked(pod: Mapping[str, Any]) -> Ask:
        return _cached(memo, ("device-asks", pod_key(pod)), pod, partial(ask_of, pod))

    adv = Advertised.of(node_objs, on_nodes, lambda p: id(p) in our_ids, engine_cards, asked)
    asks = {job_id: asked(by_key[pj.pods[0]]) for job_id, pj in jobs.items()}
    allowed.update(advertised_masks(asks, nodes, allowed, adv))
    adv = Advertised.of(node_objs, on_nodes, asked=asked)  # after the cycle: all bound count
    share = SharePolicy(max_sharers=max(SharePolicy().max_sharers, size))
    state = ClusterState([_usable(kn, held.get(name)) for name, kn in nodes.items()], share)
    if claimed is not None:
        chosen = choose(jobs, claimed.asks, nodes, allowed, state)
        allowed = {**allowed, **{j: (c.nodes, c.why) for j, c in chosen.items()}}
        allowed.update(joined_masks(jobs, claimed.joins, allowed))
        for job_id, c in chosen.items():
            jobs[job_id].job = replace(jobs[job_id].job, request=c.request)
            options.update({pod: c.option for pod in jobs[job_id].pods})
    cycle = CycleConfig(
        policy=config.policy,
        queue=QueuePolicy(classes=class_values(ours, rules.classes)),
        grace_s=config.grace_s,
        defrag_moves=defrag_moves,
        defrag_hourly=config.defrag_moves_per_hour,
        defrag_after_s=config.defrag_after_s,
        copy_for_reservations=False,  # a pod on a reservation that began is evicted
    )
    pending: list[Job] = [
        replace(pj.job, nodes=allowed[job_id][0], nodes_why=allowed[job_id][1])
        if job_id in allowed
        else pj.job
        for job_id, pj in jobs.items()
    ]
    held_for = rules.reservations_on(nodes)
    result = run_cycle(state, running, pending, tree, now, held_for, config=cycle)
    for b in result.bindings:
        if b.job_id not in jobs:
            continue  # a pod moved by defragmentation: its controller's new pod queues
        pod_names = jobs[b.job_id].pods
        if b.after:
            for pod_name in pod_names:
                out.waiting[pod_name] = f"waiting for {len(b.after)} preempted job(s) to end"
            continue
        gang = len(pod_names) > 1
        placed = list(zip(pod_names, b.placement.nodes, strict=True))
        past = _past_advertised(adv, [(piece.node, asks[b.job_id]) for _, piece in placed])
        if past:  # the engine placed more than the node advertises: next cycle, elsewhere
            for pod_name in pod_names:
                out.waiting[pod_name] = f"not bound past what its node advertises: {past}"
            continue
        for pod_name, piece in placed:
            node = nodes[piece.node].node
            granted = grant_json(b.job_id, piece, node, b.placement.policy)
            uid = uid_of(by_key[pod_name])
            signature = signed(key, uid, granted)
            write = claim_write(pod_name, piece)
            out.binds.append(Bind(pod_name, piece.node, signature, b.action, gang, uid, write))
    for p in result.preemptions:
        moved = p.cause is Cause.DEFRAGMENT
        out.moves += moved
        for pod_name in by_job.get(p.job_id, []):
            if moved:  # its controller makes it again; it queues and lands elsewhere
                why = f"moved to make room on one node for {p.by}: {p.reason}"
                out.evictions.append(Evict(pod_name, why, p.grace_s, "Defragmented"))
            else:
                why = f"preempted by {p.by}: {p.reason}"
                out.evictions.append(Evict(pod_name, why, p.grace_s))
    note = waiting_note(out.node_problems)
    for job_id, reason in result.pending.items():
        if note and reason.code in (Wait.NO_ROOM, Wait.NEVER, Wait.INVALID):
            reason = reason.also(note)
        for pod_name in jobs[job_id].pods if job_id in jobs else []:
            out.waiting.setdefault(pod_name, str(reason))
    if memo is not None:
        memo.sweep()
    return out
