"""The FGD protocol over a family of pod lists (the openb trace ships variants of the default
list: GPU-sharing-heavy, multi-GPU-heavy, GPU-type-constrained, CPU-heavy), so a policy is
judged on every mix, not tuned to one file — and, where ``published-results.csv`` lies beside
them, against the FGD paper's own medians."""

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gpupool.model import SpecError
from gpupool.scheduler.lookahead import DEPTH
from gpupool.sim.fgd_protocol import FUTURES
from gpupool.sim.fgd_report import medians
from gpupool.sim.published import Published, versus_paper
from gpupool.sim.replays import replay_files

PATTERN = "openb_pod_list_*.csv"
# the paper's baselines; FGD has to beat each of them on every file
BASELINES = ("random", "dot-product", "gpu-clustering", "gpu-packing", "paper-best-fit")


def family_files(folder: Path) -> list[Path]:
    """The pod lists of ``folder`` (``openb_pod_list_*.csv``), sorted by name."""
    if not folder.is_dir():
        raise SpecError(f"trace family: {folder} is not a folder")
    files = sorted(folder.glob(PATTERN))
    if not files:
        raise SpecError(f"trace family: no {PATTERN} in {folder}")
    return files


def trace_name(path: Path) -> str:
    return path.stem.removeprefix("openb_pod_list_")


def compare_family(
    nodes: Path,
    files: Sequence[Path],
    policies: Sequence[str],
    seeds: Sequence[int],
    tune: float,
    *,
    gpus: int,
    pod_counts: dict[str, int] | None = None,
    errors: dict[str, str] | None = None,
    published: Published | None = None,
    workers: int = 1,
    progress: Callable[[], None] | None = None,
    depth: int = DEPTH,
    futures: int = FUTURES,
) -> dict[str, Any]:
    """Per pod list: medians over seeds of unallocated GPUs at 100% and 130% arrived per
    policy, the best policy, whether ``fgd`` beats every baseline, and each policy against
    the paper's. ``errors`` names files that could not be read: they become error rows."""
    errors = errors or {}
    readable = [f for f in files if trace_name(f) not in errors]
    tasks = [(str(f), p, s) for f in readable for p in policies for s in seeds]
    runs = replay_files(nodes, tasks, tune, workers, progress, depth, futures)
    rows: dict[str, Any] = {name: {"error": why} for name, why in errors.items()}
    beats_everywhere = within_everywhere = True
    for path in readable:
        name = trace_name(path)
        per_policy = {p: medians([runs[(str(path), p, s)] for s in seeds]) for p in policies}
        at_100 = {p: m["unallocated_gpus_at_100"] for p, m in per_policy.items()}
        at_130 = {p: m["unallocated_gpus_at_130"] for p, m in per_policy.items()}
        baselines = {p: v for p, v in at_100.items() if p in BASELINES}
        beats = None
        if "fgd" in at_100 and baselines:
            beats = at_100["fgd"] < min(baselines.values())
            beats_everywhere = beats_everywhere and beats
        arrived = [m["arrived_at_end"] for m in per_policy.values()]
        row: dict[str, Any] = {
            "pods": (pod_counts or {}).get(name),
            "arrived_at_end": max(arrived) if arrived else None,  # the bag: the same for all
            "unallocated_gpus_at_100": at_100,
            "unallocated_gpus_at_130": at_130,
            "best_policy": min(at_100, key=lambda p: at_100[p]),
            "best_baseline": min(baselines, key=lambda p: baselines[p]) if baselines else None,
            "fgd_beats_baselines": beats,
        }
        paper = (published or {}).get(name, {})
        if paper:
            row["paper"] = paper
            if "fgd" in paper:
                row["versus_paper_fgd"] = {
                    p: versus_paper({"at_100": at_100[p], "at_130": at_130[p]}, paper["fgd"])
                    for p in policies
                }
                fgd_ok = row["versus_paper_fgd"].get("fgd", {}).get("within_tolerance")
                within_everywhere = within_everywhere and fgd_ok is not False
        rows[name] = row
    judged = "fgd" in policies and any(p in BASELINES for p in policies)
    return {
        "gpus": gpus,
        "seeds": list(seeds),
        "tune": tune,
        "files": rows,
        "fgd_beats_baselines_everywhere": beats_everywhere if judged else None,
        "fgd_within_5pct_of_paper_everywhere": within_everywhere if published else None,
        "unreadable_files": sorted(errors),
    }
