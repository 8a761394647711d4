"""Which nodes a pod may go to (pure): its ``nodeSelector``, its required node affinity
(``matchExpressions`` with In, NotIn, Exists, DoesNotExist, Gt, Lt; terms ORed, expressions
ANDed) and its tolerations against the nodes' NoSchedule/NoExecute taints — the rules
kube-scheduler's NodeAffinity and TaintToleration plugins apply. Computed once per distinct
set of constraints in a cycle: pods of one Deployment or Job share theirs."""

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

HARD_EFFECTS = ("NoSchedule", "NoExecute")


def constraints(pod: Mapping[str, Any]) -> str:
    """The pod's placement constraints as a key ("" when it has none)."""
    spec = pod.get("spec") or {}
    selector = spec.get("nodeSelector") or {}
    affinity = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    tolerations = spec.get("tolerations") or []
    if not (selector or affinity or tolerations):
        return ""
    return json.dumps([selector, affinity, tolerations], sort_keys=True)


def _expression(expr: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, op = expr.get("key", ""), expr.get("operator", "")
    values = [str(v) for v in expr.get("values") or []]
    present = key in labels
    if op == "In":
        return present and labels[key] in values
    if op == "NotIn":
        return not present or labels[key] not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt") and present and len(values) == 1:
        try:
            have, want = int(labels[key]), int(values[0])
        except ValueError:
            return False
        return have > want if op == "Gt" else have < want
    return False  # an operator Kubernetes would refuse matches nothing


def matches_affinity(required: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    if not required:
        return True
    terms = required.get("nodeSelectorTerms") or []
    return any(
        all(_expression(e, labels) for e in term.get("matchExpressions") or [])
        for term in terms
        if term.get("matchExpressions")
    )


def tolerates(tolerations: Sequence[Mapping[str, Any]], taint: Mapping[str, Any]) -> bool:
    for t in tolerations:
        if t.get("effect") and t.get("effect") != taint.get("effect"):
            continue
        if t.get("operator", "Equal") == "Exists":
            if not t.get("key") or t.get("key") == taint.get("key"):
                return True
        elif t.get("key") == taint.get("key") and (t.get("value") or "") == (
            taint.get("value") or ""
        ):
            return True
    return False


def node_allows(
    pod: Mapping[str, Any], node: Mapping[str, Any], always_tolerated: Iterable[str]
) -> bool:
    spec = pod.get("spec") or {}
    labels = (node.get("metadata") or {}).get("labels") or {}
    selector = spec.get("nodeSelector") or {}
    if any(labels.get(k) != v for k, v in selector.items()):
        return False
    affinity = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if not matches_affinity(affinity, labels):
        return False
    free = set(always_tolerated)
    tolerations = spec.get("tolerations") or []
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") not in HARD_EFFECTS or taint.get("key") in free:
            continue
        if not tolerates(tolerations, taint):
            return False
    return True


def hard_tainted(node: Mapping[str, Any], always_tolerated: Iterable[str]) -> bool:
    free = set(always_tolerated)
    return any(
        t.get("effect") in HARD_EFFECTS and t.get("key") not in free
        for t in (node.get("spec") or {}).get("taints") or []
    )
