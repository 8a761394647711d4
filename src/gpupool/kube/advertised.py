"""What each node's device plugins advertise, held against what gpupool binds (pure).

The kubelet admits a pod only for as many of a device plugin's resources (``nvidia.com/gpu``,
``nvidia.com/mig-<profile>``, ``nvidia.com/gpu.shared``, ``gpupool.io/slice``, other vendors'
cards) as its node's allocatable lists, less what the pods bound there ask; a resource the
node does not list at all is dropped from the pod's request (kubelet's
``removeMissingExtendedResources``), so the pod starts without that device. gpupool binds no
pod past either:

- a node that lists a resource takes pods asking it only while what they ask fits;
- a node whose device plugin advertises a MIG layout (some ``nvidia.com/mig-*``) takes no pod
  asking a profile missing from it (the pod would start with no device);
- a pod asking a share of ``nvidia.com/gpu`` through gpupool's device plugin (HAMi's
  resources beside ``gpupool.io/slice``) goes only where no device plugin lists
  ``nvidia.com/gpu``: there NVIDIA's device plugin would hand it whole cards.

``Advertised.why_not`` says why a node cannot take a pod; ``take`` counts a binding made.
"""

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gpupool.kube.inventory import MIG_PREFIX, NVIDIA_GPU, VENDOR_RESOURCES
from gpupool.kube.pod_resources import is_device_resource, pod_resources
from gpupool.kube.quantity import count
from gpupool.model import SpecError


@dataclass(frozen=True, slots=True)
class Ask:
    """What one pod asks of its node's device plugins."""

    counts: Mapping[str, int] = field(default_factory=dict)
    unlisted: frozenset[str] = frozenset()  # resources its node must not list at all


NOTHING = Ask()
CARD_RESOURCES = frozenset({NVIDIA_GPU, *VENDOR_RESOURCES})  # a card each, as the engine has it


def ask_of(pod: Mapping[str, Any]) -> Ask:
    """The pod's device-plugin resources (nothing when its resources cannot be read: it is
    refused elsewhere, naming why)."""
    try:
        r = pod_resources(pod)
    except SpecError:
        return NOTHING
    counts = dict(r.devices)
    if r.shares and r.slice and NVIDIA_GPU in counts:
        del counts[NVIDIA_GPU]  # its share comes from gpupool's device plugin
        return Ask(counts, frozenset({NVIDIA_GPU}))
    return Ask(counts) if counts else NOTHING


def listed(node: Mapping[str, Any]) -> dict[str, int]:
    """The device-plugin resources a node's allocatable lists (a garbled one as 0)."""
    out = {}
    for r, v in ((node.get("status") or {}).get("allocatable") or {}).items():
        if is_device_resource(r):
            try:
                out[r] = count(v, r)
            except SpecError:
                out[r] = 0
    return out


@dataclass
class Advertised:
    total: dict[str, dict[str, int]]  # node -> resource -> what its allocatable lists
    left: dict[str, dict[str, int]]  # node -> resource -> not asked by pods bound there

    @classmethod
    def of(
        cls,
        nodes: Iterable[Mapping[str, Any]],
        bound: Iterable[Mapping[str, Any]],
        modelled: Callable[[Mapping[str, Any]], bool] = lambda pod: False,
        cards: Mapping[str, int] | None = None,
        asked: Callable[[Mapping[str, Any]], Ask] = ask_of,
    ) -> "Advertised":
        """``bound``: the live pods with a node (any scheduler's, assumed bindings too).
        ``modelled``: pods whose whole cards the engine counts itself (gpupool's own), and
        ``cards``: the engine's cards per node. Where a node advertises as many cards as the
        engine counts, the modelled pods' cards are left out of the count, so a node they fill
        stays one the engine may preempt on; the check after the cycle counts everything.
        ``asked``: what a pod asks (the scheduler's memo keeps it between cycles)."""
        total = {str((n.get("metadata") or {}).get("name")): listed(n) for n in nodes}
        left = {name: dict(res) for name, res in total.items()}
        for pod in bound:
            name = str((pod.get("spec") or {}).get("nodeName") or "")
            node = left.get(name)
            if node is None:
                continue
            same = cards is not None and modelled(pod)
            for r, n in asked(pod).counts.items():
                if r in node and not (
                    same and r in CARD_RESOURCES and total[name][r] == (cards or {}).get(name)
                ):
                    node[r] -= n
        return cls(total, left)

    def why_not(self, node: str, ask: Ask) -> str:
        """Why ``node`` cannot take a pod asking ``ask`` ("" when it can)."""
        total, left = self.total.get(node, {}), self.left.get(node, {})
        for r in sorted(ask.unlisted):
            if r in total:
                return (
                    f"{node} lists {r}: {total[r]}, for which its kubelet hands whole cards "
                    "(a share asked with it would get them there)"
                )
        for r, n in sorted(ask.counts.items()):
            if r in total:
                if left[r] < n:
                    return f"{node} advertises {r}: {total[r]}, {total[r] - left[r]} held"
            elif r.startswith(MIG_PREFIX) and (layout := self._layout(total)):
                return f"{node}'s MIG layout advertises {layout}, not {r}"
        return ""

    def take(self, node: str, ask: Ask, sign: int = 1) -> None:
        left = self.left.get(node)
        if left is not None:
            for r, n in ask.counts.items():
                if r in left:
                    left[r] -= sign * n

    def untake(self, node: str, ask: Ask) -> None:
        self.take(node, ask, -1)

    @staticmethod
    def _layout(total: Mapping[str, int]) -> str:
        return ", ".join(f"{r}: {n}" for r, n in sorted(total.items()) if r.startswith(MIG_PREFIX))


Mask = tuple[frozenset[str] | None, str]


def advertised_masks(
    asks: Mapping[str, Ask],
    nodes: Iterable[str],
    allowed: Mapping[str, Mask],
    adv: Advertised,
) -> dict[str, Mask]:
    """Per job (``asks``: what its first pod asks), the nodes it may use once the nodes
    that cannot take it by what they advertise are out, and why those are; jobs asking
    nothing of a device plugin, or fitting everywhere, keep ``allowed``'s."""
    names = list(nodes)
    out: dict[str, Mask] = {}
    memo: dict[object, tuple[frozenset[str], list[str]]] = {}
    for job_id, ask in asks.items():
        if ask == NOTHING:
            continue
        key = (tuple(sorted(ask.counts.items())), ask.unlisted)
        if key not in memo:
            said = {n: adv.why_not(n, ask) for n in names}
            fit = frozenset(n for n, w in said.items() if not w)
            memo[key] = (fit, [w for w in said.values() if w])
        fit, refusals = memo[key]
        if not refusals:
            continue
        mask, why = allowed.get(job_id, (None, ""))
        words = f"cannot take it by what their device plugins advertise ({refusals[0]})"
        out[job_id] = (fit if mask is None else mask & fit, f"{why}, or {words}" if why else words)
    return out
