"""Where the default openb trace (Alibaba cluster-trace-gpu-v2023) is found when no paths are
given. The trace is not shipped with gpupool (its terms allow research and study use), so the
commands look in a few well-known places and say where they looked."""

import os
from pathlib import Path

NODE_FILE = "openb_node_list_gpu_node.csv"
POD_FILE = "openb_pod_list_default.csv"
ENV = "GPUPOOL_OPENB_DIR"


def candidates(cwd: Path | None = None) -> list[Path]:
    """``$GPUPOOL_OPENB_DIR``, then ``data/openb`` and ``../shared/data/openb`` below the
    working directory and below this source tree's parent (an editable install)."""
    cwd = cwd or Path.cwd()
    tree = Path(__file__).resolve().parents[4]  # src/gpupool/sim/traces -> repository root
    out = [Path(os.environ[ENV])] if os.environ.get(ENV) else []
    for root in dict.fromkeys((cwd, tree)):
        out += [root / "data" / "openb", root.parent / "shared" / "data" / "openb"]
    return out


def default_openb(
    nodes: Path | None, pods: Path | None, places: list[Path] | None = None
) -> tuple[Path, Path]:
    """The given paths, or the first folder of ``places`` (default: ``candidates()``) holding
    the file that is missing. Raises ``FileNotFoundError`` naming every place it looked."""
    if nodes is not None and pods is not None:
        return nodes, pods
    looked = candidates() if places is None else places
    for folder in looked:
        n, p = folder / NODE_FILE, folder / POD_FILE
        if (nodes is not None or n.is_file()) and (pods is not None or p.is_file()):
            return nodes or n, pods or p
    where = ", ".join(str(f) for f in looked)
    raise FileNotFoundError(
        f"trace: no --nodes/--pods given and the openb trace ({NODE_FILE}, {POD_FILE}) is not in "
        f"{where}; pass --nodes and --pods, or set {ENV}"
    )
