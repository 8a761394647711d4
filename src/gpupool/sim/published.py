"""The FGD paper's own results for the openb trace family (``published-results.csv`` beside
the pod lists: ``trace,policy,seeds,unallocated_gpus_at_100,unallocated_gpus_at_130,...``,
medians over 10 seeds), so every replay is judged against numbers nobody here produced."""

import csv
import io
from typing import Any

from gpupool.model import SpecError

FILE = "published-results.csv"
# the paper's policy labels -> our protocol's names
PAPER_NAMES = {
    "01-Random": "random",
    "02-DotProd": "dot-product",
    "03-GpuClustering": "gpu-clustering",
    "04-GpuPacking": "gpu-packing",
    "05-BestFit": "paper-best-fit",
    "06-FGD": "fgd",
}
TOLERANCE = 0.05  # "within ±5% or better than the paper's FGD"

Published = dict[str, dict[str, dict[str, float]]]  # trace -> policy -> {"at_100", "at_130"}


def parse_published(text: str, name: str = FILE) -> Published:
    """Rows with an unknown policy label are kept under the label itself; a row whose numbers
    do not parse is an error naming its line."""
    out: Published = {}
    reader = csv.DictReader(io.StringIO(text))
    need = ("trace", "policy", "unallocated_gpus_at_100", "unallocated_gpus_at_130")
    missing = [c for c in need if c not in (reader.fieldnames or [])]
    if missing:
        raise SpecError(f"{name}: missing column(s) {', '.join(missing)}")
    for row in reader:
        try:
            at_100 = float(row["unallocated_gpus_at_100"])
            at_130 = float(row["unallocated_gpus_at_130"])
        except (TypeError, ValueError):
            raise SpecError(f"{name}: line {reader.line_num}: a number does not parse") from None
        policy = PAPER_NAMES.get(row["policy"], row["policy"])
        out.setdefault(row["trace"], {})[policy] = {"at_100": at_100, "at_130": at_130}
    return out


def versus_paper(ours: dict[str, float], paper: dict[str, float]) -> dict[str, Any]:
    """Ours against the paper's FGD at 100% and 130% arrived: the relative difference and
    whether ours is within +5% (fewer unallocated GPUs is better, and always passes)."""
    diff = {k: round(ours[k] / paper[k] - 1, 4) for k in ("at_100", "at_130") if paper.get(k)}
    return {
        "paper_fgd": paper,
        "relative": diff,
        "within_tolerance": all(v <= TOLERANCE for v in diff.values()),
    }
