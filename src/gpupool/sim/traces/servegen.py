"""ServeGen request rates (alibaba/ServeGen, Apache-2.0): two weeks of production LLM-serving
load per API client in 600-second windows, one CSV per client without a header:
``timestamp_s, rate_req_per_s, cv, arrival_distribution, shape, scale`` (``cv`` and the fitted
Gamma or Weibull inter-arrival distribution describe the bursts inside a window; empty where
the client sent nothing). Summed over clients it is the load one inference service sees.

Bad rows are reported with their file and line and skipped, or the folder is rejected with
``strict=True``. The full data is found through ``GPUPOOL_SERVEGEN_DIR`` (ServeGen's
``data/language`` folder, one folder of ``*-trace.csv`` files per model); the repository ships
a two-client excerpt for its tests.
"""

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from gpupool.model import SpecError
from gpupool.sim.traces.rows import RowError, bad_rows_error

WINDOW_S = 600
ENV = "GPUPOOL_SERVEGEN_DIR"


@dataclass(frozen=True)
class RateTrace:
    """Requests per second per window, per client (zero where a client sent nothing), and
    each window's inter-arrival CV per client (0 where the row gives none)."""

    window_s: int
    clients: dict[str, np.ndarray]
    cvs: dict[str, np.ndarray] = field(default_factory=dict)

    @property
    def total(self) -> np.ndarray:
        return np.sum(list(self.clients.values()), axis=0)

    @property
    def burst_cv2(self) -> np.ndarray:
        """Per window, the squared CV the summed load's arrival counts have: independent
        clients add their count variances (rate x CV^2 per second), so the total's is
        ``sum(rate_i * cv_i^2) / sum(rate_i)`` — a squared CV kept when the load is scaled
        by adding clients alike."""
        total = self.total
        weighted = np.sum(
            [
                r * np.square(self.cvs.get(name, np.zeros_like(r)))
                for name, r in self.clients.items()
            ],
            axis=0,
        )
        out: np.ndarray = np.divide(weighted, total, out=np.zeros_like(total), where=total > 0)
        return out

    @property
    def windows(self) -> int:
        return len(next(iter(self.clients.values())))


def _rates(path: Path) -> tuple[dict[int, tuple[float, float]], list[RowError]]:
    """Per window, (rate, inter-arrival CV) of one client's file."""
    rates: dict[int, tuple[float, float]] = {}
    errors: list[RowError] = []
    try:
        with path.open(newline="") as f:
            for line, row in enumerate(csv.reader(f), start=1):
                if not row:
                    continue
                try:
                    t, rate = float(row[0]), float(row[1] or 0)
                except (ValueError, IndexError):
                    errors.append(RowError(line, "timestamp_s and rate_req_per_s must be numbers"))
                    continue
                if not (math.isfinite(t) and math.isfinite(rate)) or t < 0 or rate < 0:
                    errors.append(RowError(line, "a negative or non-finite time or rate"))
                    continue
                if t % WINDOW_S:
                    errors.append(
                        RowError(line, f"timestamp {t:g} is not on a {WINDOW_S}-s window")
                    )
                    continue
                try:
                    cv = float(row[2]) if len(row) > 2 and row[2] else 0.0
                except ValueError:
                    errors.append(RowError(line, "cv must be a number"))
                    continue
                if not math.isfinite(cv) or cv < 0:
                    errors.append(RowError(line, "a negative or non-finite cv"))
                    continue
                rates[int(t) // WINDOW_S] = (rate, cv)
    except UnicodeDecodeError:
        raise SpecError(f"{path.name}: not a text CSV file") from None
    return rates, errors


def load_rates(folder: Path, strict: bool = False) -> tuple[RateTrace, list[str]]:
    """Every ``*-trace.csv`` client of ``folder``; returns the trace and the skipped rows."""
    files = sorted(folder.glob("*-trace.csv")) if folder.is_dir() else []
    if not files:
        raise SpecError(
            f"trace: no ServeGen *-trace.csv files in {folder} (a model's folder, e.g. "
            f"data/language/m-large of alibaba/ServeGen; {ENV} names data/language)",
            field="trace",
        )
    per_client: dict[str, dict[int, tuple[float, float]]] = {}
    skipped: list[str] = []
    for path in files:
        rates, errors = _rates(path)
        if errors and strict:
            raise bad_rows_error(path.name, errors)
        skipped += [f"{path.name}: {e}" for e in errors]
        per_client[path.name.removesuffix("-trace.csv")] = rates
    length = 1 + max((max(r) for r in per_client.values() if r), default=-1)
    if length == 0:
        raise SpecError(f"trace: no usable row in {folder}", field="trace")
    clients, cvs = {}, {}
    for name, rates in per_client.items():
        series, cv = np.zeros(length), np.zeros(length)
        for window, (rate, c) in rates.items():
            series[window], cv[window] = rate, c
        clients[name], cvs[name] = series, cv
    return RateTrace(WINDOW_S, clients, cvs), skipped
