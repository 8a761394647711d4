"""A figure, its baseline and the verdict on the two (pure).

A figure is deterministic (same code, same data: same value), so its baseline's tolerance is
not noise: it is how far the value may move, the wrong way, before the gate fails. A figure
may also carry a hard ``limit`` from its definition (the FGD family's "within +5% of the
paper's FGD") that no baseline relaxes."""

from dataclasses import dataclass
from typing import Any, Literal

Direction = Literal["higher", "lower", "equal"]  # which way is better ("equal": neither)
DIRECTIONS = ("higher", "lower", "equal")
OK, BETTER, WORSE, OUT_OF_BAND, NO_BASELINE, ABSENT, NOT_COMPUTED = (
    "ok", "better", "worse", "out of band", "no baseline", "absent", "not computed",
)  # fmt: skip
FAILING = (WORSE, OUT_OF_BAND, NO_BASELINE, ABSENT)  # not computed fails only where required


@dataclass(frozen=True)
class Figure:
    name: str
    value: float | None  # None: not computed (``missing`` says why)
    direction: Direction
    tolerance: float  # the default for a new baseline
    doc: str  # where the claim is, and the full command where the gate computes less
    limit: float | None = None  # a bound from the figure's definition
    limit_why: str = ""
    missing: str = ""  # why there is no value
    data_missing: bool = False  # its data is absent here (else: computed without a value)


@dataclass(frozen=True)
class Baseline:
    value: float
    tolerance: float
    direction: Direction
    commit: str  # HEAD when it was set (plus "+changes" when the tree was not clean)
    why: str

    def as_json(self) -> dict[str, Any]:
        return {
            "value": self.value,
            "tolerance": self.tolerance,
            "direction": self.direction,
            "commit": self.commit,
            "why": self.why,
        }

    @staticmethod
    def from_json(name: str, data: dict[str, Any]) -> "Baseline":
        direction = data.get("direction")
        if direction not in DIRECTIONS:
            raise ValueError(f"baseline {name}: direction {direction!r} is not one of {DIRECTIONS}")
        try:
            return Baseline(
                float(data["value"]),
                float(data["tolerance"]),
                direction,
                str(data["commit"]),
                str(data["why"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"baseline {name}: {exc}") from None


@dataclass(frozen=True)
class Verdict:
    name: str
    status: str  # one of the statuses above
    value: float | None
    baseline: Baseline | None
    message: str

    @property
    def fails(self) -> bool:
        return self.status in FAILING


def judge(figure: Figure, baseline: Baseline | None) -> Verdict:
    """The figure against its hard limit, then against its baseline and tolerance."""
    value = figure.value
    if value is None:
        if figure.data_missing:  # the reason is the data's, shared by its figures
            return Verdict(figure.name, NOT_COMPUTED, None, baseline, figure.missing)
        return Verdict(figure.name, ABSENT, None, baseline, f"{figure.name}: {figure.missing}")
    if figure.limit is not None and _past(value, figure.limit, figure.direction):
        return Verdict(
            figure.name, OUT_OF_BAND, value, baseline,
            f"{figure.name} = {value:g} is past its limit {figure.limit:g} ({figure.limit_why})",
        )  # fmt: skip
    if baseline is None:
        return Verdict(
            figure.name, NO_BASELINE, value, None,
            f"{figure.name} = {value:g} has no baseline: set one with --update --why '...'",
        )  # fmt: skip
    delta = value - baseline.value
    worse = {"higher": -delta, "lower": delta, "equal": abs(delta)}[baseline.direction]
    said = (
        f"{figure.name} = {value:g}, baseline {baseline.value:g} ({baseline.direction} is better"
        f", tolerance {baseline.tolerance:g}, set at {baseline.commit})"
    )
    if baseline.direction == "equal":
        said = (
            f"{figure.name} = {value:g}, baseline {baseline.value:g} (must not move more than "
            f"{baseline.tolerance:g}, set at {baseline.commit})"
        )
    if worse > baseline.tolerance + 1e-9:
        return Verdict(figure.name, WORSE, value, baseline, said)
    if -worse > baseline.tolerance + 1e-9:  # better beyond the tolerance: worth recording
        return Verdict(figure.name, BETTER, value, baseline, said + "; better: --update records it")
    return Verdict(figure.name, OK, value, baseline, said)


def _past(value: float, limit: float, direction: Direction) -> bool:
    if direction == "lower":
        return value > limit + 1e-9
    if direction == "higher":
        return value < limit - 1e-9
    return False
