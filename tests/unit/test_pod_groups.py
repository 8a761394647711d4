"""Gang sizes from PodGroups (pure; issue 45)."""

import pytest

from gpupool.kube.config import parse_config
from gpupool.kube.pod_groups import sizes_from
from gpupool.kube.pods import gang_of, jobs_from_pods
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
    jobs, problems = jobs_from_pods(pods, CONFIG, {("team-a", "train"): 2})
    assert problems == {}
    (job,) = jobs.values()
    assert job.job.gang_size == 3 and len(job.pods) == 3
