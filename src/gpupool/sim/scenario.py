"""Team scenarios: a small YAML format users copy and edit (see examples/seed-scenario.yaml).

A scenario names the cluster (groups of identical servers), the teams with their guaranteed
cards, and workloads: Poisson arrivals of jobs during given hours of the day, or a service
whose replica count follows a day/night curve. Validation errors name the field.
"""

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, Field, ValidationError, field_validator

from gpupool.model import JobKind, SpecError, parse_request
from gpupool.model.errors import from_validation


class NodeGroup(BaseModel):
    count: int = Field(gt=0)
    model: str
    cards: int = Field(gt=0, le=64)
    cpu: int = Field(64, gt=0, description="cores per server")
    memory_gib: int = Field(512, gt=0)


class TeamSpec(BaseModel):
    name: str = Field(min_length=1)
    guarantee: float = Field(ge=0, description="guaranteed cards")


class Service(BaseModel):
    day: int = Field(ge=0, description="replicas during the day")
    night: int = Field(ge=0, description="replicas at night")
    day_hours: tuple[int, int] = (8, 22)


class WorkloadSpec(BaseModel):
    team: str
    kind: JobKind = JobKind.BATCH
    request: str
    priority_class: str | None = None
    arrivals_per_hour: float | None = Field(None, gt=0)
    hours: tuple[int, int] = (0, 24)
    duration_hours: float = Field(1.0, gt=0, description="mean run time (exponential)")
    service: Service | None = None

    @field_validator("request")
    @classmethod
    def _grammar(cls, value: str) -> str:
        parse_request(value)  # SpecError names the bad token
        return value


class Scenario(BaseModel):
    name: str = "scenario"
    days: float = Field(7, gt=0, le=90)
    tick_minutes: int = Field(5, gt=0, le=240)
    seed: int = 1
    cluster: list[NodeGroup] = Field(min_length=1)
    teams: list[TeamSpec] = Field(min_length=1)
    workloads: list[WorkloadSpec] = Field(default_factory=list)
    traces: list[str] = Field(default_factory=list, description="job trace files (CSV/JSONL)")
    # the scheduler's victim order (CycleConfig.victim_order): "work" (the server's default)
    # or "age"
    victim_order: Literal["work", "age"] = "work"


def load_scenario(path: str | Path) -> Scenario:
    """Read and validate a scenario file; every problem raises SpecError naming the field."""
    try:
        raw = yaml.safe_load(Path(path).read_text())
    except FileNotFoundError:
        raise SpecError(f"scenario: {path} does not exist") from None
    except yaml.YAMLError as exc:
        raise SpecError(f"scenario: {path} is not valid YAML: {exc}") from None
    scenario = parse_scenario(raw, str(path))
    base = Path(path).parent
    scenario.traces = [str((base / t).resolve()) for t in scenario.traces]
    return scenario


def parse_scenario(raw: object, where: str = "scenario") -> Scenario:
    if not isinstance(raw, dict):
        raise SpecError(f"{where}: expected a mapping at the top level")
    try:
        scenario = Scenario.model_validate(raw)
    except ValidationError as exc:
        raise from_validation(exc, where) from None
    except SpecError as exc:
        raise SpecError(f"{where}: {exc}") from None
    if not scenario.workloads and not scenario.traces:
        raise SpecError(f"{where}: give workloads or traces", field="workloads")
    teams = {t.name for t in scenario.teams}
    for i, w in enumerate(scenario.workloads):
        if w.team not in teams:
            raise SpecError(f"{where}: workloads.{i}.team: unknown team {w.team!r}", field="team")
        if w.arrivals_per_hour is None and w.service is None:
            raise SpecError(
                f"{where}: workloads.{i}: give arrivals_per_hour or service", field="workloads"
            )
    return scenario
