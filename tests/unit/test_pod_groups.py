"""Gang sizes from PodGroups (pure; issue 45)."""

import pytest

from gpupool.kube.config import parse_config
from gpupool.kube.pod_groups import groups_from, sizes_from
from gpupool.kube.pods import GROUP_GRACE_S, gang_of, group_pods
from gpupool.model import SpecError
from tests.support.kube_objects import pod_obj

VOLCANO = {"scheduling.k8s.io/group-name": "train"}
CONFIG = parse_config({"namespaces": {"team-a": "a"}, "tenants": [{"name": "a"}]})


def test_min_member_of_each_group():
    items = [
        {"metadata": {"namespace": "team-a", "name": "train"}, "spec": {"minMember": 2}},
        {"metadata": {"namespace": "team-a", "name": "odd"}, "spec": {"minMember": "many"}},
        {"metadata": {"namespace": "team-b", "name": "none"}, "spec": {}},
    ]
    assert sizes_from(items) == {("team-a", "train"): 2}


def test_a_pod_of_a_group_takes_its_size_or_says_what_is_missing():
    pod = pod_obj("w-0", gpus=1, annotations=VOLCANO)
    assert gang_of(pod, {("team-a", "train"): 2}) == ("train", 2)
    with pytest.raises(SpecError, match="no PodGroup train with minMember here"):
        gang_of(pod, {("team-b", "train"): 2})  # another namespace's group is not its own


def test_more_pods_than_min_member_are_placed_together():
    pods = [pod_obj(f"w-{i}", gpus=1, annotations=VOLCANO) for i in range(3)]
    grouped = group_pods(pods, CONFIG, {("team-a", "train"): 2})
    jobs, problems = grouped.jobs, grouped.problems
    assert problems == {}
    (job,) = jobs.values()
    assert job.job.gang_size == 3 and len(job.pods) == 3


def test_mixed_roles_the_gpu_pods_are_the_gang_and_the_cpu_ones_follow_it():
    """A Volcano job's CPU-only master beside its GPU workers (refused before: "its pods ask
    for different resources")."""
    master = pod_obj("job-master-0", cpu="1", annotations=VOLCANO)
    workers = [pod_obj(f"job-worker-{i}", gpus=4, annotations=VOLCANO) for i in range(2)]
    groups = {("team-a", "train"): 3}
    grouped = group_pods([master, *workers], CONFIG, groups)
    (gang,) = grouped.jobs.values()
    assert gang.job.gang_size == 2 and gang.pods == ["team-a/job-worker-0", "team-a/job-worker-1"]
    assert grouped.waiting == {
        "team-a/job-master-0": "gang train: a CPU-only member, placed once its 2 GPU pod(s) are"
    }
    later = group_pods([master], CONFIG, groups, placed_gangs={"team-a/gang/train"})
    assert list(later.jobs) == ["team-a/job-master-0"] and later.waiting == later.problems == {}
    odd = [*workers, pod_obj("job-worker-2", gpus=1, annotations=VOLCANO), master]
    refused = group_pods(odd, CONFIG, {("team-a", "train"): 4})
    assert set(refused.problems.values()) == {"gang train: its pods ask for different resources"}


QUEUED = parse_config(
    {"namespaces": {"team-a": "a"}, "tenants": [{"name": "a"}], "queues": {"research": "a"}}
)


def _pg(name: str, **spec) -> dict:
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "metadata": {"namespace": "team-a", "name": name, "uid": f"uid-{name}"},
        "spec": {"minMember": 2, **spec},
    }


def test_a_queue_is_honoured_only_where_it_charges_the_namespaces_own_tenant():
    items = [
        _pg("mine", queue="research"),
        _pg("theirs", queue="prod"),
        _pg("plain", queue="default"),
    ]
    sizes, _ = groups_from(items, QUEUED)
    assert sizes[("team-a", "mine")] == 2 and sizes[("team-a", "plain")] == 2
    assert "queue 'prod'" in str(sizes[("team-a", "theirs")])
    pod = pod_obj("w-0", gpus=1, annotations={"scheduling.k8s.io/group-name": "theirs"})
    with pytest.raises(SpecError, match="map queue prod to it under queues"):
        gang_of(pod, sizes)
    unmapped, _ = groups_from([_pg("mine", queue="research")], CONFIG)  # no queues: setting
    assert isinstance(unmapped[("team-a", "mine")], str)


def test_what_gpupool_does_not_read_of_a_group_is_said_once_per_group():
    items = [_pg("a", minResources={"nvidia.com/gpu": "8"}, minTaskMember={"worker": 2}), _pg("b")]
    _, notes = groups_from(items, CONFIG)
    (note,) = notes
    assert note.involved["kind"] == "PodGroup" and note.involved["uid"] == "uid-a"
    assert note.message.startswith("minResources, minTaskMember not read by gpupool")


def test_a_young_pod_whose_podgroup_is_not_seen_is_held_silently_then_refused():
    """The PodGroup and its pods come by separate watches: a pod seen first is held without
    a word for GROUP_GRACE_S (issue 63: it was refused at once, a false Warning), then
    refused naming the missing group."""
    pod = pod_obj("w-0", gpus=1, annotations=VOLCANO)
    pod["metadata"]["creationTimestamp"] = "2026-12-07T10:00:00Z"
    made = 1_796_637_600.0  # that instant, in epoch seconds
    young = group_pods([pod], CONFIG, {}, now=made + 3)
    assert "no PodGroup train" in young.held["team-a/w-0"] and not young.problems
    old = group_pods([pod], CONFIG, {}, now=made + GROUP_GRACE_S + 1)
    assert "no PodGroup train" in old.problems["team-a/w-0"] and not old.held
    assert "team-a/w-0" in group_pods([pod], CONFIG, {}).problems  # no clock: at once
