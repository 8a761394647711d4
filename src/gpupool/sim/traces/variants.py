"""Workload variants of an openb pod list, made the way the trace's own variants were made.

The openb trace ships, next to its default pod list, lists "sampled from the default one,
emphasizing certain types of workloads" (GPU-sharing-heavy ``gpushare*``, multi-GPU-heavy
``multigpu*``, CPU-heavy ``cpu*``) and lists whose GPU tasks carry GPU-type constraints
(``gpuspec*``). When those files are not at hand, these functions make variants of the same
four kinds from the default list, so a policy can be judged on several mixes instead of being
tuned to one file. They are ours, not the published files: figures on them do not compare
with the paper's, only policies with each other.

- ``gpushare``: the fraction of GPU pods that share a card (``gpu_milli`` < 1000);
- ``multigpu``: the fraction of the GPU request that pods with several cards carry;
- ``cpu``: the fraction of all pods that ask for no GPU;
- ``gpuspec``: the fraction of GPU pods limited to one GPU type (one the cluster has, on a
  node that could hold the pod, drawn by the cluster's card count per type); no resampling.

A resampled variant has as many pods as the source, drawn with replacement: first a category
by its target share, then a pod of that category uniformly. Categories the variant does not
target keep their shares relative to each other. Pure logic over CSV rows (dicts of strings).
"""

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from gpupool.model import Node, SpecError

Row = dict[str, str]
KINDS = ("gpushare", "multigpu", "cpu", "gpuspec")


@dataclass(frozen=True, slots=True)
class Variant:
    kind: str  # one of KINDS
    fraction: float  # 0 < fraction < 1

    @property
    def name(self) -> str:
        return f"{self.kind}{round(self.fraction * 100)}"


STANDARD = (
    Variant("gpushare", 0.8),
    Variant("multigpu", 0.5),
    Variant("cpu", 0.4),
    Variant("gpuspec", 0.33),
)


def _num(row: Row, key: str) -> int:
    return int((row.get(key) or "0").strip() or 0)


def category(row: Row) -> str:
    """cpu (no GPU), share (part of one card), multi (several cards) or single (one card)."""
    count = _num(row, "num_gpu")
    if count == 0:
        return "cpu"
    if count > 1:
        return "multi"
    return "share" if _num(row, "gpu_milli") < 1000 else "single"


def gpu_request(row: Row) -> int:
    """The pod's GPU request in milli-GPU."""
    return _num(row, "num_gpu") * _num(row, "gpu_milli")


def mix(rows: Sequence[Row]) -> dict[str, float]:
    """What each variant kind targets, measured on ``rows``."""
    counts = Counter(category(r) for r in rows)
    gpu_pods = len(rows) - counts["cpu"]
    total_gpu = sum(gpu_request(r) for r in rows)
    multi_gpu = sum(gpu_request(r) for r in rows if category(r) == "multi")
    constrained = sum(1 for r in rows if category(r) != "cpu" and (r.get("gpu_spec") or "").strip())
    return {
        "pods": len(rows),
        "gpushare": counts["share"] / gpu_pods if gpu_pods else 0.0,
        "multigpu": multi_gpu / total_gpu if total_gpu else 0.0,
        "cpu": counts["cpu"] / len(rows) if rows else 0.0,
        "gpuspec": constrained / gpu_pods if gpu_pods else 0.0,
    }


def make_variant(
    rows: Sequence[Row], variant: Variant, nodes: Sequence[Node], seed: int = 0
) -> list[Row]:
    """The variant's pod rows (new dicts; ``rows`` is left as it is)."""
    if variant.kind not in KINDS:
        raise SpecError(f"variant: kind {variant.kind!r} is not one of {', '.join(KINDS)}")
    if not 0 < variant.fraction < 1:
        raise SpecError(f"variant {variant.name}: fraction must be between 0 and 1")
    rng = random.Random(seed)
    if variant.kind == "gpuspec":
        return _constrain(rows, variant.fraction, nodes, rng)
    by_category: dict[str, list[Row]] = {}
    for row in rows:
        by_category.setdefault(category(row), []).append(row)
    shares = _targets(by_category, variant)
    names = [c for c in shares if shares[c] > 0]
    weights = [shares[c] for c in names]
    out: list[Row] = []
    for k in range(len(rows)):
        pool = by_category[rng.choices(names, weights)[0]]
        picked = dict(pool[rng.randrange(len(pool))])
        picked["name"] = f"{picked.get('name', 'pod')}-{variant.name}-{k}"
        out.append(picked)
    return out


def _targets(by_category: dict[str, list[Row]], variant: Variant) -> dict[str, float]:
    """Target share of pods per category."""
    counts = {c: len(by_category.get(c, ())) for c in ("cpu", "share", "single", "multi")}
    total = sum(counts.values())
    wanted = {"gpushare": "share", "multigpu": "multi", "cpu": "cpu"}[variant.kind]
    if not counts[wanted]:
        raise SpecError(f"variant {variant.name}: the pod list has no {wanted} pods to sample")
    f = variant.fraction
    if variant.kind == "cpu":
        rest = {c: n for c, n in counts.items() if c != "cpu"}
        return {"cpu": f, **_spread(rest, 1 - f)}
    cpu = counts["cpu"] / total
    gpu = 1 - cpu
    if variant.kind == "gpushare":
        whole = {c: counts[c] for c in ("single", "multi")}
        return {"cpu": cpu, "share": gpu * f, **_spread(whole, gpu * (1 - f))}
    # multigpu: f of the GPU request from multi-card pods -> their share of GPU pods
    multi_mean = _mean_request(by_category["multi"])
    others = [r for c in ("share", "single") for r in by_category.get(c, ())]
    if not others:
        raise SpecError(f"variant {variant.name}: the pod list has only multi-card GPU pods")
    other_mean = _mean_request(others)
    p = f * other_mean / (f * other_mean + (1 - f) * multi_mean)
    rest = {c: counts[c] for c in ("share", "single")}
    return {"cpu": cpu, "multi": gpu * p, **_spread(rest, gpu * (1 - p))}


def _spread(counts: dict[str, int], share: float) -> dict[str, float]:
    """``share`` split over categories in proportion to their pod counts."""
    total = sum(counts.values())
    return {c: share * n / total if total else 0.0 for c, n in counts.items()}


def _mean_request(rows: Sequence[Row]) -> float:
    return sum(gpu_request(r) for r in rows) / len(rows)


def _constrain(
    rows: Sequence[Row], fraction: float, nodes: Sequence[Node], rng: random.Random
) -> list[Row]:
    cards: Counter[str] = Counter(d.model for n in nodes for d in n.devices)
    if not cards:
        raise SpecError("variant gpuspec: the node list has no GPUs")
    types_for: dict[tuple[int, int, int], list[str]] = {}  # GPU types a pod size can run on
    out: list[Row] = []
    for row in rows:
        row = dict(row)
        if category(row) != "cpu" and rng.random() < fraction:
            size = (_num(row, "num_gpu"), _num(row, "cpu_milli"), _num(row, "memory_mib"))
            if size not in types_for:
                need, cpu, mem = size
                types_for[size] = sorted(
                    {
                        n.devices[0].model
                        for n in nodes
                        if len(n.devices) >= need and n.cpu_millis >= cpu and n.memory_mib >= mem
                    }
                )
            fits = types_for[size]
            if fits:
                row["gpu_spec"] = rng.choices(fits, [cards[m] for m in fits])[0]
        out.append(row)
    return out
