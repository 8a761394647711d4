"""A pod's effective request as Kubernetes counts it (pure)."""

import pytest

from gpupool.kube.pod_resources import pod_resources
from gpupool.kube.pods import container_requests, request_of
from gpupool.model import SpecError


def pod(containers, init=(), annotations=None) -> dict:
    return {
        "metadata": {"namespace": "team-a", "name": "p", "annotations": annotations or {}},
        "spec": {"containers": list(containers), "initContainers": list(init)},
    }


def test_init_containers_count_by_their_largest_and_sidecars_with_the_containers():
    p = pod(
        [{"name": "a", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}},
         {"name": "b", "resources": {"limits": {"cpu": "1", "nvidia.com/gpu": 1}}}],
        init=[{"name": "warm", "resources": {"limits": {"cpu": "4", "nvidia.com/gpu": 2}}},
              {"name": "proxy", "restartPolicy": "Always",
               "resources": {"requests": {"cpu": "500m"}}}],
    )  # fmt: skip
    assert container_requests(p) == (4000, 1024, 2)  # cpu max(4, 2+1+0.5), gpu max(2, 1)
    assert str(request_of(p)).startswith("gpu=2,cpu=4000m,mem=1GiB")


def test_a_request_wins_over_its_limit_and_hugepages_are_left_to_the_kubelet():
    p = pod([{"name": "a", "resources": {"requests": {"cpu": "1"}, "limits": {
        "cpu": "8", "hugepages-2Mi": "1Gi", "ephemeral-storage": "10Gi"}}}])  # fmt: skip
    assert container_requests(p) == (1000, 0, 0)


@pytest.mark.parametrize(
    "containers, words",
    [
        ([{"name": "a", "resources": {"limits": {"rdma/hca": 1}}}], "by 'rdma/hca'"),
        ([{"name": "a", "resources": {"limits": {"nvidia.com/gpucores": 30}}}],
         "without nvidia.com/gpu"),
        ([{"name": "a", "resources": {"limits": {"nvidia.com/mig-1g.10gb": 1,
                                                 "nvidia.com/mig-2g.20gb": 1}}}],
         "one kind of device"),
        ([{"name": "a", "resources": {"limits": {"nvidia.com/mig-9g.99gb": 1}}}], "9g.99gb"),
    ],
)  # fmt: skip
def test_what_cannot_be_honoured_is_refused_naming_it(containers, words):
    with pytest.raises(SpecError) as refused:
        request_of(pod(containers))
    assert words in str(refused.value)


def test_a_mig_instance_and_a_share_hold_their_card_in_the_count():
    mig = pod([{"name": "a", "resources": {"limits": {"nvidia.com/mig-1g.10gb": 2}}}])
    assert pod_resources(mig).mig == {"1g.10gb": 2} and container_requests(mig)[2] == 2
    assert str(request_of(mig)) == "mig=1g.10gb:2"
    hami = pod([{"name": "a", "resources": {"limits": {"nvidia.com/gpu": 1, "gpupool.io/slice": 1,
                                                       "nvidia.com/gpumem": 10240}}}])  # fmt: skip
    assert str(request_of(hami)) == "gpu=1,gpu_mem=10GiB"
