"""GPU manifests nobody here wrote (tests/data/k8s-corpus, sources in SOURCES.md): what
gpupool makes of each pod is what the device plugin, HAMi or kube-scheduler would do with it,
or a refusal naming what it cannot honour — never a silent grant."""

import pytest
import yaml

from gpupool.kube.pods import request_of
from gpupool.model import SpecError
from tests.support.kube_objects import K8S_CORPUS, pod_of

EXPECTED = yaml.safe_load((K8S_CORPUS / "expected.yaml").read_text())


def test_the_corpus_is_whole():
    files = sorted(p.name for p in K8S_CORPUS.glob("*.yaml") if p.name != "expected.yaml")
    assert files == sorted(EXPECTED) and len(files) >= 10


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_manifest_is_read_as_its_world_reads_it_or_refused_by_name(name):
    pod = pod_of(yaml.safe_load((K8S_CORPUS / name).read_text()))
    expected = EXPECTED[name]
    if expected.startswith("refused: "):
        with pytest.raises(SpecError) as refused:
            request_of(pod)
        assert expected.removeprefix("refused: ") in str(refused.value)
    else:
        assert str(request_of(pod)) == expected
