"""Recompute the figures (worker processes, the longest first) and judge each against its
baseline. A figure worse than its baseline beyond the tolerance, past its limit, without a
baseline, or not computed where ``GPUPOOL_REQUIRE_FIGURES`` is set fails the gate. Seconds
are reported with the machine, never gated."""

import os
import platform
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any

from gpupool.bench.figures.catalog import GROUPS, Group
from gpupool.bench.figures.model import NOT_COMPUTED, Baseline, Figure, Verdict, judge
from gpupool.bench.figures.sources import REQUIRE_ENV, Sources
from gpupool.bench.figures.tasks import Task, timed

Runner = Callable[[Sequence[Task], int, Callable[[str], None] | None], dict[str, Any]]


def select(names: Iterable[str] | None) -> list[Group]:
    """The groups named (all when None); an unknown name is a ValueError listing them."""
    if names is None:
        return list(GROUPS)
    known = {g.name: g for g in GROUPS}
    wanted = list(names)
    unknown = [n for n in wanted if n not in known]
    if unknown:
        raise ValueError(f"unknown figure group(s) {', '.join(unknown)}; one of {', '.join(known)}")
    return [known[n] for n in wanted]


def run_tasks(
    tasks: Sequence[Task], workers: int, progress: Callable[[str], None] | None = None
) -> dict[str, Any]:
    """``{key: result, "seconds": {key: s}}``: tasks of one key run once, the longest first."""
    unique = {task.key: task for task in tasks}
    ordered = sorted(unique.values(), key=lambda task: -task.cost_s)
    results: dict[str, Any] = {}
    seconds: dict[str, float] = {}
    with ProcessPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = [pool.submit(timed, task) for task in ordered]
        for future in as_completed(futures):
            key, result, took = future.result()
            results[key], seconds[key] = result, took
            if progress:
                progress(key)
    return {**results, "seconds": seconds}


def compute(
    groups: Sequence[Group],
    sources: Sources,
    workers: int,
    runner: Runner = run_tasks,
    progress: Callable[[str], None] | None = None,
) -> tuple[list[Figure], dict[str, Any]]:
    """Every figure of ``groups`` (those whose data is missing with ``value`` None and the
    reason), and the seconds each group took."""
    missing = {g.name: g.needs(sources) for g in groups}
    todo = [task for g in groups if not missing[g.name] for task in g.tasks(sources)]
    start = time.perf_counter()
    results = runner(todo, workers, progress) if todo else {"seconds": {}}
    wall = time.perf_counter() - start
    figures: list[Figure] = []
    for g in groups:
        for spec in g.specs:
            why = missing[g.name]
            value = None if why else spec.value(results)
            bound = spec.limit(sources) if spec.limit and not why else None
            figures.append(
                Figure(
                    spec.name,
                    value,
                    spec.direction,
                    spec.tolerance,
                    spec.doc,
                    limit=bound[0] if bound else None,
                    limit_why=bound[1] if bound else "",
                    missing=why or ("" if value is not None else "computed, but no value"),
                    data_missing=bool(why),
                )
            )
    seconds = results["seconds"]
    timing = {
        "wall_s": round(wall, 1),
        "workers": workers,
        "groups_task_s": {  # seconds its tasks took in the workers (shared tasks count in each)
            g.name: round(sum(seconds.get(t.key, 0.0) for t in g.tasks(sources)), 1)
            for g in groups
            if not missing[g.name]
        },
    }
    return figures, timing


@dataclass(frozen=True)
class Report:
    verdicts: list[Verdict]
    required: bool  # a figure not computed fails

    @property
    def failures(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.fails or (self.required and v.status == NOT_COMPUTED)]

    @property
    def not_computed(self) -> list[Verdict]:
        return [v for v in self.verdicts if v.status == NOT_COMPUTED]

    @property
    def passed(self) -> bool:
        return not self.failures

    def summary(self) -> list[str]:
        """What a person reads at the end: failures by name, what was not computed, the tally."""
        lines = [f"FAIL {v.status}: {v.message}" for v in self.failures if v.status != NOT_COMPUTED]
        if self.not_computed:
            reasons = sorted(
                {v.message.removeprefix(NOT_COMPUTED + ": ") for v in self.not_computed}
            )
            verdict = "FAIL" if self.required else "NOTE"
            because = f" ({REQUIRE_ENV} is set)" if self.required else ""
            lines.append(
                f"{verdict}: {len(self.not_computed)} of {len(self.verdicts)} figures not "
                f"computed{because}: " + "; ".join(reasons)
            )
        checked = len(self.verdicts) - len(self.not_computed)
        bad = len([v for v in self.failures if v.status != NOT_COMPUTED])
        lines.append(
            f"{'passed' if self.passed else 'FAILED'}: {checked - bad} of {checked} computed "
            f"figures within their baselines"
            + (f", {len(self.not_computed)} not computed" if self.not_computed else "")
        )
        return lines


def check(figures: Sequence[Figure], baselines: Mapping[str, Baseline], required: bool) -> Report:
    return Report([judge(f, baselines.get(f.name)) for f in figures], required)


def machine() -> dict[str, Any]:
    """Where the seconds were measured (they are reported, not gated): host, CPU, cores and
    a reference loop's time, as docs/performance.md quotes it."""
    start = time.perf_counter()
    sum(range(3 * 10**7))
    return {
        "host": platform.node(),
        "machine": platform.machine(),
        "processor": _cpu_model(),
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "reference_loop_s": round(time.perf_counter() - start, 2),
    }


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()
