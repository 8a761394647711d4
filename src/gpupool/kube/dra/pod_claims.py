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
from gpupool.kube.inventory import KubeNode
from gpupool.kube.pod_resources import pod_resources
from gpupool.kube.pods import REQUEST_ANNOTATION, PodJob, meta, pod_key
from gpupool.model import ResourceRequest, SpecError, parse_request
from gpupool.scheduler.ask import compile_ask
from gpupool.scheduler.filters import feasibility
from gpupool.scheduler.state import ClusterState


@dataclass
class ClaimedPods:
    pods: list[Mapping[str, Any]] = field(default_factory=list)  # as the engine reads them
    asks: dict[str, ClaimAsk] = field(default_factory=dict)  # pod -> its gpupool claim
    problems: dict[str, str] = field(default_factory=dict)  # pod -> what cannot be honoured
    waiting: dict[str, str] = field(default_factory=dict)  # pod -> what it waits for


def _ask(pod: Mapping[str, Any], claims: Mapping[str, Mapping[str, Any]]) -> ClaimAsk | str:
    """The pod's claim, or what it waits for; SpecError for what gpupool cannot honour."""
    ns = pod_key(pod).split("/", 1)[0]
    names = claim_names(pod)
    if names is None:
        return "its ResourceClaim from a template is not made yet"
    missing = [n for n in names if f"{ns}/{n}" not in claims]
    if missing:
        return f"ResourceClaim {missing[0]} does not exist yet"
    asks = [claim_ask(claims[f"{ns}/{n}"]) for n in names]
    if len(asks) != 1:
        raise SpecError(f"{len(asks)} ResourceClaims of gpupool's classes (one per pod is read)")
    (ask,) = asks
    claim = claims[f"{ns}/{ask.name}"]
    users = [str(r.get("uid")) for r in (claim.get("status") or {}).get("reservedFor") or []]
    if users and users != [str((pod.get("metadata") or {}).get("uid"))]:
        raise SpecError(
            f"ResourceClaim {ask.name} is reserved for another pod: a claim shared by several "
            "pods is not placed by gpupool yet"
        )
    if REQUEST_ANNOTATION in meta(pod, "annotations"):
        raise SpecError(f"annotation {REQUEST_ANNOTATION} beside a ResourceClaim: ask one way")
    asked = pod_resources(pod)
    if asked.cards or asked.mig or asked.replicas or asked.cores is not None:
        raise SpecError("device resources in containers beside a ResourceClaim: ask one way")
    return ask


def with_claims(
    pods: Iterable[Mapping[str, Any]], claims: Mapping[str, Mapping[str, Any]]
) -> ClaimedPods:
    """Our pending pods, those with claims given their claim's request."""
    out = ClaimedPods()
    for pod in pods:
        if not (pod.get("spec") or {}).get("resourceClaims"):
            out.pods.append(pod)
            continue
        key = pod_key(pod)
        try:
            got = _ask(pod, claims)
        except SpecError as exc:
            out.problems[key] = str(exc)
            continue
        if isinstance(got, str):
            out.waiting[key] = got
            continue
        notes = {**meta(pod, "annotations"), REQUEST_ANNOTATION: got.spec}
        out.pods.append({**pod, "metadata": {**(pod.get("metadata") or {}), "annotations": notes}})
        out.asks[key] = got
    return out


def claim_holds(claims: Iterable[Mapping[str, Any]], our_pod_uids: set[str]) -> dict[str, set[int]]:
    """Per node, cards that claims of our driver not reserved for our pods hold."""
    claims = list(claims)
    ours = {
        str((c.get("metadata") or {}).get("uid"))
        for c in claims
        if any(
            str(r.get("uid")) in our_pod_uids
            for r in (c.get("status") or {}).get("reservedFor") or []
        )
    }
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
