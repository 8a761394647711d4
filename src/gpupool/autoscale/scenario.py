"""The autoscaling scenario: the pool, the service's replicas and both policies' settings.

A small YAML file users copy and edit (``examples/autoscale-scenario.yaml``); every number the
comparison depends on is stated there. Validation errors name the field.
"""

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, Field, ValidationError, model_validator

from gpupool.autoscale.replay import ServiceModel
from gpupool.model import SpecError
from gpupool.model.errors import from_validation


class Pool(BaseModel):
    servers: int = Field(10, gt=0)
    cards_per_server: int = Field(4, gt=0)
    model: str = "A100-80G"

    @property
    def cards(self) -> int:
        return self.servers * self.cards_per_server


class ServiceSpec(BaseModel):
    team: str = "inference"
    replica_rps: float = Field(10.0, gt=0, description="req/s one replica holds within its SLO")
    gpus_per_replica: float = Field(1.0, gt=0)
    min_replicas: int = Field(1, ge=0)
    max_replicas: int = Field(40, gt=0)
    peak_share_of_pool: float = Field(0.5, gt=0, le=1, description="trace scaled to this")
    # the product's defaults: `service create --startup 60`, the server's `grace_s` 30
    load_s: float = Field(60, ge=0, description="model load: card to serving")
    grace_s: float = Field(30, ge=0, description="preemption grace to free a training card")
    restart_cost_s: float = Field(600, ge=0, description="training work lost per card taken")
    timeout_s: float = Field(60, gt=0, description="the balancer drops requests queued longer")

    @model_validator(mode="after")
    def _bounds(self) -> "ServiceSpec":
        if self.min_replicas > self.max_replicas:
            raise ValueError("min_replicas is above max_replicas")
        return self


class ReactiveSpec(BaseModel):
    stable_s: float = Field(60, gt=0)
    panic_threshold: float = Field(2.0, gt=1)
    scale_down_delays_s: list[float] = Field(default_factory=lambda: [0.0, 600.0, 1800.0])
    utilisation_from: float = Field(0.5, gt=0, le=1)
    utilisation_to: float = Field(1.0, gt=0, le=1)
    utilisation_step: float = Field(0.025, gt=0)


class PredictiveSpec(BaseModel):
    quantile: float = Field(0.9, gt=0, lt=1)
    volatility_hours: float = Field(0, ge=0)
    headroom: float = Field(1.0, gt=0, description="the default the comparison is made at")
    headroom_from: float = Field(0.8, gt=0)
    headroom_to: float = Field(1.5, gt=0)
    headroom_step: float = Field(0.025, gt=0)


class HarvestSpec(BaseModel):
    """Harvest@99's mechanisms: the anchors' leads and losses and gpupool's warm path."""

    slo_target: float = Field(0.01, gt=0, lt=1, description="of minutes that may violate")
    slow_grace_s: float = Field(300, ge=0, description="the former simulator's grace")
    slow_load_s: float = Field(180, ge=0, description="the former simulator's load")
    # decision to serving when a parked engine wakes: the vacate's grace (5 s), the wake
    # (vLLM sleep level 1: 0.1-6 s published, 0.6B-235B) and the control loop's turns
    warm_lead_s: float = Field(20, ge=0)
    vacate_lost_s: float = Field(5, ge=0, description="work lost by a job saving on the signal")
    restart_s: float = Field(60, ge=0, description="a training job's restart, per card")
    gang: int = Field(4, gt=0, description="cards per training job for the gang harvest")


class AutoscaleScenario(BaseModel):
    name: str = "autoscale"
    tick_s: int = Field(10, gt=0, le=600)
    # smooth: each 600-s window's mean rate held over its ticks; bursty: each tick's count
    # drawn from the window's rate and inter-arrival CV (load.bursty_ticks), with this seed
    arrivals: Literal["smooth", "bursty"] = "smooth"
    seed: int = Field(0, ge=0)
    learn_days: int = Field(7, gt=0)
    judge_days: int = Field(7, gt=0)
    pool: Pool = Field(default_factory=Pool)
    service: ServiceSpec = Field(default_factory=ServiceSpec)
    reactive: ReactiveSpec = Field(default_factory=ReactiveSpec)
    predictive: PredictiveSpec = Field(default_factory=PredictiveSpec)
    harvest: HarvestSpec = Field(default_factory=HarvestSpec)

    def service_model(self) -> ServiceModel:
        s = self.service
        return ServiceModel(
            replica_rps=s.replica_rps,
            load_s=s.load_s,
            grace_s=s.grace_s,
            min_replicas=s.min_replicas,
            max_replicas=s.max_replicas,
            pool_gpus=self.pool.cards,
            gpus_per_replica=s.gpus_per_replica,
            restart_cost_s=s.restart_cost_s,
            timeout_s=s.timeout_s,
        )


def load_scenario(path: Path) -> AutoscaleScenario:
    """Read and validate a scenario file; SpecError names the file and the bad field."""
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except OSError as e:
        raise SpecError(f"{path}: {e.strerror}", field="scenario") from None
    except yaml.YAMLError as e:
        raise SpecError(f"{path}: not valid YAML ({e})", field="scenario") from None
    try:
        return AutoscaleScenario.model_validate(data)
    except ValidationError as e:
        raise from_validation(e, str(path), "scenario") from None


def scenario_with(scenario: AutoscaleScenario, changes: dict[str, object]) -> AutoscaleScenario:
    """The scenario with ``changes`` (command-line options), validated; SpecError names a bad
    value."""
    try:
        return AutoscaleScenario.model_validate({**scenario.model_dump(), **changes})
    except ValidationError as e:
        raise from_validation(e, "option") from None
