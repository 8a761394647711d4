"""The FGD protocol over a family of pod lists (the openb trace ships variants of the default
list: GPU-sharing-heavy, multi-GPU-heavy, GPU-type-constrained, CPU-heavy), so a policy is
judged on every mix, not tuned to one file."""

from collections.abc import Callable, Sequence
from pathlib import Path

from gpupool.model import Node, SpecError
from gpupool.sim.fgd_report import run_fgd_protocol
from gpupool.sim.traces.openb import Pod

PATTERN = "openb_pod_list_*.csv"
# the paper's baselines; FGD has to beat each of them on every file
BASELINES = ("random", "dot-product", "gpu-clustering", "gpu-packing", "best-fit")


def family_files(folder: Path) -> list[Path]:
    """The pod lists of ``folder`` (``openb_pod_list_*.csv``), sorted by name."""
    if not folder.is_dir():
        raise SpecError(f"trace family: {folder} is not a folder")
    files = sorted(folder.glob(PATTERN))
    if not files:
        raise SpecError(f"trace family: no {PATTERN} in {folder}")
    return files


def compare_family(
    nodes: Sequence[Node],
    pod_lists: Sequence[tuple[str, Sequence[Pod]]],
    policies: Sequence[str],
    seeds: Sequence[int],
    tune: float,
    progress: Callable[[], None] | None = None,
) -> dict[str, object]:
    """Per pod list: median unallocated GPUs at 100% arrived per policy, the best policy, the
    best baseline, and whether ``fgd`` beats every baseline that ran."""
    files: dict[str, object] = {}
    everywhere = True
    for name, pods in pod_lists:
        result = run_fgd_protocol(nodes, pods, policies, seeds, tune, progress)
        unallocated = {
            policy: row["unallocated_gpus_at_100"]  # type: ignore[index]
            for policy, row in result["policies"].items()  # type: ignore[union-attr]
        }
        baselines = {p: v for p, v in unallocated.items() if p in BASELINES}
        beats = None
        if "fgd" in unallocated and baselines:
            beats = unallocated["fgd"] < min(baselines.values())
            everywhere = everywhere and beats
        files[name] = {
            "pods": result["pods"],
            "unallocated_gpus_at_100": unallocated,
            "best_policy": min(unallocated, key=lambda p: unallocated[p]),
            "best_baseline": min(baselines, key=lambda p: baselines[p]) if baselines else None,
            "fgd_beats_baselines": beats,
        }
    judged = "fgd" in policies and any(p in BASELINES for p in policies)
    return {
        "nodes": len(nodes),
        "gpus": sum(len(n.devices) for n in nodes),
        "seeds": list(seeds),
        "tune": tune,
        "files": files,
        "fgd_beats_baselines_everywhere": everywhere if judged else None,
    }
