"""DRA claims nobody here wrote (tests/data/k8s-corpus/claims, sources in SOURCES.md): the
Kubernetes docs' and NVIDIA's DRA driver's, read as the request gpupool places or refused
naming what it cannot honour (issue 63)."""

from typing import Any

import pytest
import yaml

from gpupool.kube.dra.claims import claim_ask
from gpupool.model import SpecError
from tests.support.kube_objects import K8S_CORPUS

CLAIMS = K8S_CORPUS / "claims"
EXPECTED = yaml.safe_load((CLAIMS / "expected.yaml").read_text())


def claim_of(path) -> dict[str, Any]:
    """The file's ResourceClaim, or the claim its ResourceClaimTemplate makes, as the API
    server serves it in resource.k8s.io/v1 (a v1beta1 request's fields go under
    ``exactly``, what its conversion does)."""
    for doc in yaml.safe_load_all(path.read_text()):
        if doc["kind"] not in ("ResourceClaim", "ResourceClaimTemplate"):
            continue
        spec = doc["spec"]["spec"] if doc["kind"] == "ResourceClaimTemplate" else doc["spec"]
        requests = []
        for req in spec["devices"]["requests"]:
            if "exactly" not in req and "firstAvailable" not in req:
                req = {"name": req["name"],
                       "exactly": {k: v for k, v in req.items() if k != "name"}}  # fmt: skip
            requests.append(req)
        meta = {"namespace": "team-a", "uid": "claim-uid", **doc["metadata"]}
        return {"metadata": meta, "spec": {**spec, "devices": {**spec["devices"],
                                                               "requests": requests}}}  # fmt: skip
    raise AssertionError(f"{path.name}: no ResourceClaim or ResourceClaimTemplate")


def test_the_claims_corpus_is_whole():
    files = sorted(p.name for p in CLAIMS.glob("*.yaml") if p.name != "expected.yaml")
    assert files == sorted(EXPECTED) and len(files) >= 6


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_claim_is_read_as_the_reference_allocator_reads_it_or_refused_by_name(name):
    expected = EXPECTED[name]
    claim = claim_of(CLAIMS / name)
    if expected.startswith("refused: "):
        with pytest.raises(SpecError) as refused:
            claim_ask(claim)
        assert expected.removeprefix("refused: ") in str(refused.value)
    else:
        assert claim_ask(claim).spec == expected
