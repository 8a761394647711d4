"""The baselines file: one entry per figure (value, tolerance, direction, the commit that set
it and why), read for every check and written only by ``--update``."""

import json
import subprocess
from collections.abc import Iterable
from pathlib import Path

from gpupool.bench.figures.model import Baseline, Figure

FILE = Path(__file__).with_name("baselines.json")


def load(path: Path = FILE) -> dict[str, Baseline]:
    """The baselines of ``path`` by figure name; a malformed entry is a ValueError naming it."""
    data = json.loads(path.read_text())
    entries = data.get("figures")
    if not isinstance(entries, dict):
        raise ValueError(f"{path}: no 'figures' object")
    return {name: Baseline.from_json(name, entry) for name, entry in entries.items()}


def save(baselines: dict[str, Baseline], path: Path = FILE) -> None:
    body = {
        "about": (
            "Baselines of gpupool bench figures --check (docs/figures.md). Change one only with "
            "gpupool bench figures --update --why '...', in a commit that says why."
        ),
        "figures": {name: baselines[name].as_json() for name in sorted(baselines)},
    }
    path.write_text(json.dumps(body, indent=1, ensure_ascii=False) + "\n")


def updated(
    baselines: dict[str, Baseline], figures: Iterable[Figure], commit: str, why: str
) -> tuple[dict[str, Baseline], list[str]]:
    """``baselines`` with every computed figure's value set (tolerance and direction kept, a
    new figure's from the catalogue); returns them and the names that changed."""
    out = dict(baselines)
    changed = []
    for f in figures:
        if f.value is None:
            continue
        old = out.get(f.name)
        if old is not None and old.value == f.value:
            continue
        tolerance = old.tolerance if old else f.tolerance
        direction = old.direction if old else f.direction
        out[f.name] = Baseline(f.value, tolerance, direction, commit, why)
        changed.append(f.name)
    return out, changed


def head_commit(repo: Path | None = None) -> str:
    """HEAD's short hash, with ``+changes`` when tracked files differ from it; ``unknown``
    outside a git checkout."""
    where = repo or Path(__file__).resolve().parents[4]

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=where, capture_output=True, text=True, check=True
        ).stdout.strip()

    try:
        commit = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return commit + ("+changes" if dirty else "")
