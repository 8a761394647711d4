"""The default openb trace for ``simulate`` and ``bench simulate`` options."""

from pathlib import Path

from gpupool.model import SpecError
from gpupool.sim.traces.default_trace import ENV, default_openb

DEFAULT_TRACE = f"[default: the openb trace in ${ENV}, ./data/openb or ../shared/data/openb]"


def trace_paths(nodes: Path | None, pods: Path | None) -> tuple[Path, Path]:
    try:
        return default_openb(nodes, pods)
    except FileNotFoundError as exc:
        raise SpecError(str(exc)) from None


def require_files(*paths: Path) -> None:
    for path in paths:
        if not path.is_file():
            raise SpecError(f"trace: {path} is not a file")


def trace_files(nodes: Path | None, pods: Path | None) -> tuple[Path, Path]:
    """``trace_paths``, checked to be files."""
    nodes, pods = trace_paths(nodes, pods)
    require_files(nodes, pods)
    return nodes, pods


def seed_list(text: str) -> list[int]:
    """``--seeds 0,1,2``: at least one integer."""
    try:
        seeds = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise SpecError(f"seeds: {text!r} is not a comma-separated list of integers") from None
    if not seeds:
        raise SpecError("seeds: give at least one")
    return seeds
