"""Which figures the gate recomputes: for each group, the tasks that compute it and, per
figure, where the claim is, which way is better and the default tolerance of a new baseline.

The slow figures are gated on fewer seeds than their docs' tables (the whole gate runs in a
few minutes on two cores); each such figure's name says its seeds, and ``doc`` gives the
command for the full figure."""

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from gpupool.bench.figures import tasks as t
from gpupool.bench.figures.model import Direction
from gpupool.bench.figures.sources import SERVEGEN_MODEL, Sources

Results = Mapping[str, Any]
FULL_SEEDS = tuple(range(42, 52))  # the docs' reported seeds
FAMILY_SEEDS = (42, 43, 44)  # the family in the gate: 3 of them (full: 42-51)
LOOKAHEAD_SEED = 42  # fgd-lookahead takes ~30 s a replay: one seed in the gate
DEFRAG_SEEDS = (42, 43, 44)
# the 12 lists the FGD paper published results for (docs/simulation.md's family table)
PUBLISHED_MIXES = (
    "cpu050", "cpu100", "cpu200", "default", "gpushare60", "gpushare80", "gpuspec10",
    "gpuspec20", "gpuspec25", "multigpu20", "multigpu30", "multigpu40",
)  # fmt: skip
BAND = 0.05  # docs/simulation.md: our fgd within +5% of (or below) the paper's FGD
COST_S = {"fgd": 2.5, "best-fit": 1.2, "paper-best-fit": 1.2, "fgd-lookahead": 30.0}
SIM = "docs/simulation.md"


@dataclass(frozen=True)
class Spec:
    name: str
    direction: Direction
    tolerance: float
    doc: str
    value: Callable[[Results], float | None]
    limit: Callable[[Sources], tuple[float, str] | None] | None = None


@dataclass(frozen=True)
class Group:
    name: str
    needs: Callable[[Sources], str]  # why it cannot be computed here ("" when it can)
    tasks: Callable[[Sources], list[t.Task]]
    specs: list[Spec] = field(default_factory=list)


def _key(mix: str, policy: str, seed: int) -> str:
    return f"protocol:{mix}:{policy}:{seed}"


def _protocol_tasks(src: Sources, mix: str, policy: str, seeds: tuple[int, ...]) -> list[t.Task]:
    folder = str(src.openb)
    return [
        t.Task(_key(mix, policy, s), t.protocol, (folder, mix, policy, s), COST_S[policy])
        for s in seeds
    ]


def _median(mix: str, policy: str, seeds: tuple[int, ...], at: str) -> Callable[[Results], float]:
    """The median over seeds, as ``simulate fgd`` and ``simulate family`` report it."""

    def value(results: Results) -> float:
        from gpupool.sim.fgd_report import medians

        runs = [results[_key(mix, policy, s)] for s in seeds]
        return float(medians(runs)[f"unallocated_gpus_at_{at}"])

    return value


def _needs_openb(src: Sources) -> str:
    return "" if src.openb else src.openb_missing


def _needs_published(src: Sources) -> str:
    if not src.openb:
        return src.openb_missing
    if not src.published:
        return f"not computed: the paper's published-results.csv is not in {src.openb}"
    return ""


def _needs_servegen(src: Sources) -> str:
    return "" if src.servegen else src.servegen_missing


def _needs_scenario(src: Sources) -> str:
    return "" if t.SCENARIO.is_file() else f"not computed: {t.SCENARIO} (run from a checkout)"


def _default_tasks(src: Sources) -> list[t.Task]:
    out = [
        task
        for policy in ("fgd", "best-fit", "paper-best-fit")
        for task in _protocol_tasks(src, "default", policy, FULL_SEEDS)
    ]
    return out + _protocol_tasks(src, "default", "fgd-lookahead", (LOOKAHEAD_SEED,))


FULL_FGD = "gpupool simulate fgd --policies fgd,best-fit,paper-best-fit --seeds 42-51 --json"
OPENB_DEFAULT = Group(
    "openb-default",
    _needs_openb,
    _default_tasks,
    [
        *(
            Spec(
                f"openb.default.{policy}.unallocated_gpus_at_100",
                "lower",
                tol,
                f"{SIM} (default trace, seeds 42-51): {FULL_FGD}",
                _median("default", policy, FULL_SEEDS, "100"),
            )
            for policy, tol in (("fgd", 3.0), ("best-fit", 4.5), ("paper-best-fit", 4.4))
        ),
        Spec(
            f"openb.default.fgd-lookahead.seed{LOOKAHEAD_SEED}.unallocated_gpus_at_100",
            "lower",
            2.8,
            f"README, {SIM} (median of seeds 42-51: 280.8; full figure, ~4 min: "
            "gpupool simulate fgd --policies fgd-lookahead --seeds 42-51 --json)",
            _median("default", "fgd-lookahead", (LOOKAHEAD_SEED,), "100"),
        ),
    ],
)


@cache
def _published(path: Path) -> dict[str, dict[str, dict[str, float]]]:
    from gpupool.sim.published import parse_published

    return parse_published(path.read_text(), path.name)


def _band(mix: str, at: str) -> Callable[[Sources], tuple[float, str] | None]:
    def limit(src: Sources) -> tuple[float, str] | None:
        if src.published is None:
            return None
        paper = _published(src.published).get(mix, {}).get("fgd", {}).get(f"at_{at}")
        if paper is None:
            return None
        return paper * (1 + BAND), f"the paper's FGD {paper:g} + 5%, {SIM}"

    return limit


def _family_tasks(src: Sources) -> list[t.Task]:
    return [
        task for mix in PUBLISHED_MIXES for task in _protocol_tasks(src, mix, "fgd", FAMILY_SEEDS)
    ]


SEEDS_NAME = f"seeds{FAMILY_SEEDS[0]}-{FAMILY_SEEDS[-1]}"
OPENB_FAMILY = Group(
    "openb-family",
    _needs_published,
    _family_tasks,
    [
        Spec(
            f"openb.family.{mix}.fgd.{SEEDS_NAME}.unallocated_gpus_at_{at}",
            "lower",
            3.0,
            f"{SIM}, the family table (seeds 42-51; full figure, ~9 min for six policies: "
            "gpupool simulate family --json)",
            _median(mix, "fgd", FAMILY_SEEDS, at),
            _band(mix, at),
        )
        for mix in PUBLISHED_MIXES
        for at in ("100", "130")
    ],
)


def _defrag_value(seed: int, part: str, probe: str) -> Callable[[Results], float]:
    def value(results: Results) -> float:
        return float(results[f"defrag:{seed}"][part][f"placeable_{probe}"])

    return value


DEFRAG = Group(
    "defrag",
    _needs_openb,
    lambda src: [t.Task(f"defrag:{s}", t.defrag, (str(src.openb), s), 6.0) for s in DEFRAG_SEEDS],
    [
        Spec(
            f"defrag.openb.seed{seed}.{probe}_placeable_{label}",
            "higher",
            0.0,
            f"docs/defragmentation.md (gpupool simulate defrag --seed {seed} --json)",
            _defrag_value(seed, part, probe),
        )
        for seed in DEFRAG_SEEDS
        for probe in ("8gpu", "4gpu")
        for part, label in (("before", "as_is"), ("after", "with_moves"))
    ],
)


def _utilisation(mode: str) -> Callable[[Results], float]:
    def value(results: Results) -> float:
        return float(results["scenario"][mode]["gpu_utilization"])

    return value


SCENARIO_DOC = (
    "README, docs/simulation.md (gpupool simulate scenario examples/seed-scenario.yaml --json)"
)
SCENARIO = Group(
    "scenario",
    _needs_scenario,
    lambda src: [t.Task("scenario", t.scenario, (str(t.SCENARIO),), 8.0)],
    [
        Spec(
            "scenario.seed.pooled.gpu_utilization",
            "higher",
            0.005,
            SCENARIO_DOC,
            _utilisation("pooled"),
        ),
        # the comparison's baselines: they must not move (the gain is measured against them)
        Spec(
            "scenario.seed.static_partition.gpu_utilization",
            "equal",
            0.005,
            SCENARIO_DOC,
            _utilisation("static_partition"),
        ),
        Spec(
            "scenario.seed.static_quota.gpu_utilization",
            "equal",
            0.005,
            SCENARIO_DOC,
            _utilisation("static_quota"),
        ),
    ],
)


def _roi_value(case: str, key: str) -> Callable[[Results], float]:
    def value(results: Results) -> float:
        return float(results["roi"][case][key])

    return value


ROI = Group(
    "roi",
    lambda src: "",
    lambda src: [t.Task("roi", t.roi, (), 0.1)],
    [
        Spec(
            f"roi.{case}.{key}",
            "equal",
            0.0,
            f"{SIM}, ROI (gpupool simulate roi --cards 50 --util-before 0.30 --util-after 0.70"
            f" --platform-cost 150000{' --headroom 0.15' if headroom else ''} --json)",
            _roi_value(case, key),
        )
        for case, headroom in t.ROI_CASES.items()
        for key in ("cards_freed", "monthly_saving", "payback_months")
    ],
)

# Harvest@99's contenders: gpupool's warm paths (with the SLO feedback, and issue 49's with
# its headroom fixed) must not get worse; the anchors and the ceiling are what they are
# measured against, so they must not move
CONTENDERS: dict[str, Direction] = {
    "kpa-480s": "equal", "kpa-90s": "equal", "constant-90s": "equal", "seasonal-90s": "equal",
    "gpupool-warm": "higher", "gpupool-warm-fixed": "higher", "clairvoyant": "equal",
}  # fmt: skip
HARVEST_DOC = (
    f"{SIM}, Harvest@99 (m-large smooth: gpupool simulate autoscale --model m-large --json, "
    ".harvest)"
)


def _harvest_value(*path: str) -> Callable[[Results], float | None]:
    def value(results: Results) -> float | None:
        node: Any = results["harvest"]
        for part in path:
            node = node[part]
        return None if node is None else float(node)

    return value


def _harvest_specs() -> list[Spec]:
    out = [
        Spec(f"harvest.m-large.{name}.harvest_at_99", way, 50.0, HARVEST_DOC,
             _harvest_value("contenders", name, "harvest_at_99"))
        for name, way in CONTENDERS.items()
    ]  # fmt: skip
    return [
        *out,
        Spec("harvest.m-large.gap_closed", "higher", 0.01, HARVEST_DOC,
             _harvest_value("gap_closed")),
        Spec("harvest.m-large.kpa-90s.gang_at_99", "equal", 14.0, HARVEST_DOC,
             _harvest_value("contenders", "kpa-90s", "harvest_gang_at_99")),
        Spec("harvest.m-large.gpupool-warm.gang_at_99", "higher", 50.0, HARVEST_DOC,
             _harvest_value("contenders", "gpupool-warm", "harvest_gang_at_99")),
        Spec("harvest.m-large.gpupool-warm-fixed.gang_at_99", "higher", 50.0, HARVEST_DOC,
             _harvest_value("contenders", "gpupool-warm-fixed", "harvest_gang_at_99")),
        Spec("harvest.m-large.best_anchor.slo_min_at_budget", "equal", 1.0, HARVEST_DOC,
             _harvest_value("best_anchor_slo_at_budget")),
        # with the SLO feedback gpupool-warm's front starts above the budget (none there)
        Spec("harvest.m-large.gpupool-warm-fixed.slo_min_at_budget", "lower", 1.0,
             HARVEST_DOC,
             _harvest_value("contenders", "gpupool-warm-fixed", "slo_violating_min_at_budget")),
        # the headline (issue 66): gpupool-warm's setting learned on days 2-7, on days 8-14
        Spec("harvest.m-large.headline.gpupool-warm.slo_violating_min", "lower", 1.0,
             HARVEST_DOC,
             _harvest_value("headline", "gpupool-warm", "slo_violating_min")),
        Spec("harvest.m-large.headline.gpupool-warm.harvest_gpu_hours_week", "higher", 50.0,
             HARVEST_DOC,
             _harvest_value("headline", "gpupool-warm", "harvest_gpu_hours_week")),
    ]  # fmt: skip


HARVEST = Group(
    "harvest",
    _needs_servegen,
    lambda src: [
        t.Task("harvest", t.harvest, (str(Path(str(src.servegen)) / SERVEGEN_MODEL),), 70.0)
    ],
    _harvest_specs(),
)

GROUPS = (OPENB_DEFAULT, OPENB_FAMILY, DEFRAG, SCENARIO, ROI, HARVEST)
