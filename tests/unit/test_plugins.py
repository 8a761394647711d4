"""A policy is one plugin function: replacing ``preemptable`` changes who gives way, and
nothing else of the cycle."""

from dataclasses import replace

from gpupool.model import Job, parse_request
from gpupool.scheduler import ClusterState, Placer
from gpupool.scheduler.cycle import CycleConfig, RunningJob, run_cycle
from gpupool.scheduler.plugins import default_plugins
from tests.support.builders import cluster, tree


def _cycle(plugins_for=None):
    nodes = cluster(1, cards=2)
    low = Job("low", parse_request("gpu=2"), tenant="a", priority_class="dev-test")
    state = ClusterState(nodes)
    placement = Placer("best-fit").place(state, low, explain=False)
    running = [RunningJob(low, placement, 0.0)]
    high = Job("high", parse_request("gpu=2"), tenant="a", priority_class="online-inference")
    config, tenants, placer = CycleConfig(policy="best-fit"), tree(a=2), Placer("best-fit")
    plugins = plugins_for(config, tenants, placer) if plugins_for else None
    return run_cycle(
        ClusterState(nodes), running, [high], tenants, 10.0, config=config, placer=placer,
        plugins=plugins,
    )  # fmt: skip


def test_the_default_lets_lower_priority_give_way():
    result = _cycle()
    assert [b.action for b in result.bindings] == ["preempt"]
    assert [p.job_id for p in result.preemptions] == ["low"]


def test_a_plugin_that_protects_dev_jobs_is_one_function():
    def protect_dev(config, tenants, placer):
        base = default_plugins(config.queue, tenants, placer)

        def preemptable(victim, job, action):
            return victim.job.priority_class != "dev-test" and base.preemptable(victim, job, action)

        return replace(base, preemptable=preemptable)

    result = _cycle(protect_dev)
    assert result.bindings == [] and result.preemptions == []
    assert "high" in result.pending
