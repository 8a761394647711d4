"""What the leader's cycle (and its plan of start times) decides by, from the settings."""

from dataclasses import replace

from gpupool.scheduler.cycle import CycleConfig
from gpupool.scheduler.min_runtime import MinRuntime
from gpupool.server.settings import Settings
from gpupool.server.snapshot import CycleInputs


def min_runtime(settings: Settings) -> MinRuntime:
    """The minimum run times the settings give the cycle (none by default)."""
    return MinRuntime(
        settings.min_runtime_s, settings.min_runtime_tenant_s, settings.min_runtime_bound_s
    )


def cycle_config(settings: Settings, inputs: CycleInputs, defrag_moves: int) -> CycleConfig:
    """``defrag_moves``: the moves defragmentation may still make this hour."""
    st = settings
    return CycleConfig(
        policy=st.policy,
        queue=replace(inputs.queue, fairshare_weight=st.fairshare_weight),
        grace_s=st.grace_s,
        defrag_moves=defrag_moves,
        defrag_hourly=st.defrag_moves_per_hour,
        defrag_after_s=st.defrag_after_s,
        defrag_checkpoint_s=st.defrag_checkpoint_s,
        replacing=inputs.replacing,
        defrag_class=st.defrag_class or None,
        victim_order=st.victim_order,
        min_runtime=min_runtime(st),
    )


def unknown_names(settings: Settings, inputs: CycleInputs) -> list[str]:
    """Priority classes and tenants the minimum run time settings name that do not exist."""
    classes = sorted(set(settings.min_runtime_s) - set(inputs.queue.classes))
    tenants = sorted(set(settings.min_runtime_tenant_s) - set(inputs.tenants.tenants))
    return [f"min_runtime_s: no priority class {c!r}" for c in classes] + [
        f"min_runtime_tenant_s: no tenant {t!r}" for t in tenants
    ]
