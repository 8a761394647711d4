"""Pods asking through ResourceClaims, made into pods gpupool's engine reads (pure).

A pending pod of gpupool's whose claims name gpupool's device classes gets its claim's
request as its ``gpupool.io/request`` (host CPU and memory stay its containers'), so it is
queued, placed, preempted and billed as every pod is; the claim is remembered, and its
allocation written from the grant when the pod is bound (``claims.allocation``)."""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from gpupool.kube.dra.claims import ClaimAsk, Option, claim_ask, claim_names, held_elsewhere
from gpupool.kube.dra.kinds import Variants
from gpupool.kube.inventory import KubeNode
from gpupool.kube.pod_resources import pod_resources
from gpupool.kube.pods import REQUEST_ANNOTATION, PodJob, meta, node_of, pod_key, uid_of
from gpupool.model import ResourceRequest, SpecError, parse_request
from gpupool.scheduler.ask import compile_ask
from gpupool.scheduler.filters import feasibility
from gpupool.scheduler.state import ClusterState


@dataclass(frozen=True, slots=True)
class Join:
    """A pod sharing a claim already allocated (for another pod, or by someone): it goes to
    the claim's node, takes no device of its own, and is added to the claim's reservedFor."""

    namespace: str
    name: str
    node: str


@dataclass
class ClaimedPods:
    pods: list[Mapping[str, Any]] = field(default_factory=list)  # as the engine reads them
    asks: dict[str, ClaimAsk] = field(default_factory=dict)  # pod -> its gpupool claim
    joins: dict[str, Join] = field(default_factory=dict)  # pod -> the shared claim it joins
    problems: dict[str, str] = field(default_factory=dict)  # pod -> what cannot be honoured
    waiting: dict[str, str] = field(default_factory=dict)  # pod -> what it waits for


def _ask(
    pod: Mapping[str, Any], claims: Mapping[str, Mapping[str, Any]], variants: Variants
) -> ClaimAsk | Join | str:
    """The pod's claim to allocate, the allocated claim it shares, or what it waits for;
    SpecError for what gpupool cannot honour."""
    ns = pod_key(pod).split("/", 1)[0]
    names = claim_names(pod)
    if names is None:
        return "its ResourceClaim from a template is not made yet"
    missing = [n for n in names if f"{ns}/{n}" not in claims]
    if missing:
        return f"ResourceClaim {missing[0]} does not exist yet"
    asks = [claim_ask(claims[f"{ns}/{n}"], variants) for n in names]
    if len(asks) != 1:
        raise SpecError(f"{len(asks)} ResourceClaims of gpupool's classes (one per pod is read)")
    (ask,) = asks
    if REQUEST_ANNOTATION in meta(pod, "annotations"):
        raise SpecError(f"annotation {REQUEST_ANNOTATION} beside a ResourceClaim: ask one way")
    asked = pod_resources(pod)
    if asked.cards or asked.mig or asked.replicas or asked.cores is not None:
        raise SpecError("device resources in containers beside a ResourceClaim: ask one way")
    status = claims[f"{ns}/{ask.name}"].get("status") or {}
    users = [str(r.get("uid")) for r in status.get("reservedFor") or []]
    if not status.get("allocation") or (users and users[0] == uid_of(pod)):
        return ask  # to allocate, or allocated for this very pod (a restart)
    results = ((status["allocation"].get("devices") or {}).get("results")) or []
    pools = {str(r.get("pool")) for r in results}
    if len(pools) != 1:
        raise SpecError(f"ResourceClaim {ask.name}: allocated on {len(pools)} nodes (one is read)")
    return Join(ns, ask.name, pools.pop())


def with_claims(
    pods: Iterable[Mapping[str, Any]],
    claims: Mapping[str, Mapping[str, Any]],
    variants: Variants = (),
) -> ClaimedPods:
    """Our pods, those with claims given their claim's request (or the shared claim they
    join). Of pending pods naming one claim not yet allocated, the first allocates it and the
    others wait for it (then join). ``variants``: the cluster's (model, memory MiB) cards."""
    out = ClaimedPods()
    allocating: dict[tuple[str, str], str] = {}  # claim -> the pod allocating it
    ordered = sorted(pods, key=lambda p: (not node_of(p), pod_key(p)))  # bound pods first
    for pod in ordered:
        if not (pod.get("spec") or {}).get("resourceClaims"):
            out.pods.append(pod)
            continue
        key = pod_key(pod)
        try:
            got = _ask(pod, claims, variants)
        except SpecError as exc:
            out.problems[key] = str(exc)
            continue
        if isinstance(got, str):
            out.waiting[key] = got
            continue
        if isinstance(got, Join):
            out.pods.append(pod)  # its containers ask no device: it holds the claim's
            out.joins[key] = got
            continue
        first = allocating.setdefault((got.namespace, got.name), key)
        if first != key and not node_of(pod):
            out.waiting[key] = f"ResourceClaim {got.name} is being allocated for pod {first}"
            continue
        notes = {**meta(pod, "annotations"), REQUEST_ANNOTATION: got.spec}
        out.pods.append({**pod, "metadata": {**(pod.get("metadata") or {}), "annotations": notes}})
        out.asks[key] = got
    return out


def card_variants(nodes: Iterable[KubeNode]) -> Variants:
    """The (model, memory MiB) of the nodes' cards, what claims' selectors on memory read."""
    return tuple(sorted({(d.model, d.memory_mib) for kn in nodes for d in kn.node.devices}))


def claim_holds(claims: Iterable[Mapping[str, Any]], our_pod_uids: set[str]) -> dict[str, set[int]]:
    """Per node, the cards claims of our driver hold that no grant of ours does: a claim is
    ours while the pod it was allocated for (first in its reservedFor) is one of our live
    pods, whose grant holds its cards; pods that joined it later hold none of their own."""
    claims = list(claims)
    ours = set()
    for c in claims:
        users = (c.get("status") or {}).get("reservedFor") or []
        if users and str(users[0].get("uid")) in our_pod_uids:
            ours.add(str((c.get("metadata") or {}).get("uid")))
    return held_elsewhere(claims, ours)


@dataclass(frozen=True, slots=True)
class Choice:
    """How a claimed job is placed this cycle: the option taken, its request, the nodes it may
    use and why the others are not."""

    option: Option
    request: ResourceRequest
    nodes: frozenset[str] | None
    why: str


def _node_mask(state: ClusterState, names: frozenset[str] | None) -> np.ndarray | None:
    if names is None:
        return None
    mask = np.zeros(len(state.index), dtype=bool)
    for name in names:
        if name in state.index:
            mask[state.index[name]] = True
    return mask


def choose(
    jobs: Mapping[str, PodJob],
    asks: Mapping[str, ClaimAsk],
    nodes: Mapping[str, KubeNode],
    allowed: Mapping[str, tuple[frozenset[str] | None, str]],
    state: ClusterState,
) -> dict[str, Choice]:
    """Per claimed job, the option it is placed by: the first of a prioritized list that some
    node can take now (kube-scheduler's allocator decides so too), else the first; each kept
    to nodes whose cards are of its class's mode — the engine may give an idle shared card
    whole, but a claim of ``gpu.gpupool.io`` names a device its node publishes as whole."""
    by_mode: dict[str, frozenset[str]] = {}
    out: dict[str, Choice] = {}
    for job_id, pj in jobs.items():
        ask = asks.get(pj.pods[0])
        if ask is None:
            continue
        constrained, why = allowed.get(job_id, (None, ""))
        choices = []
        for option in ask.options:
            if option.mode not in by_mode:
                by_mode[option.mode] = frozenset(
                    name
                    for name, kn in nodes.items()
                    if any(d.mode.value == option.mode for d in kn.node.devices)
                )
            kind = by_mode[option.mode]
            reason = f"no {option.mode} cards for its ResourceClaim"
            names = kind if constrained is None else constrained & kind
            if len(ask.options) == 1:  # the job was made from it (the request annotation)
                request = pj.job.request
            else:
                try:
                    request = parse_request(option.spec).with_host(
                        pj.job.request.cpu_millis, pj.job.request.mem_mib
                    )
                except SpecError:
                    continue  # an option naming what no node has: the next one
            choices.append(Choice(option, request, names, f"{why}, or {reason}" if why else reason))
        if not choices:
            continue  # the job's own request (the first option) says why it cannot be read
        chosen = choices[0]
        if len(choices) > 1:
            for choice in choices:
                try:
                    fe = feasibility(
                        state, compile_ask(state, choice.request), _node_mask(state, choice.nodes)
                    )
                except SpecError:
                    continue
                if fe.node_ok.any():
                    chosen = choice
                    break
        out[job_id] = chosen
    return out


def joined_masks(
    jobs: Mapping[str, PodJob],
    joins: Mapping[str, Join],
    allowed: Mapping[str, tuple[frozenset[str] | None, str]],
) -> dict[str, tuple[frozenset[str] | None, str]]:
    """Each job of a pod joining a shared claim kept to the claim's node."""
    out: dict[str, tuple[frozenset[str] | None, str]] = {}
    for job_id, pj in jobs.items():
        join = joins.get(pj.pods[0])
        if join is None:
            continue
        constrained, why = allowed.get(job_id, (None, ""))
        node = frozenset({join.node})
        reason = f"its shared ResourceClaim {join.name} is allocated on {join.node}"
        mask = node if constrained is None else constrained & node
        out[job_id] = (mask, f"{why}, or {reason}" if why else reason)
    return out
