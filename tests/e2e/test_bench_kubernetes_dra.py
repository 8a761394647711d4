"""``gpupool bench kubernetes --dra`` on a small cluster: both schedulers allocate every claim
from the same ResourceSlices and neither gives a card twice (the figures are the bench's)."""

import os

import pytest

from gpupool.bench.kubernetes import run_kubernetes_bench
from gpupool.kube.control_plane import ENABLE, binaries_available


def test_both_schedulers_allocate_every_claim_and_no_card_twice():
    if not binaries_available():
        if os.environ.get("GPUPOOL_REQUIRE_K8S"):
            raise RuntimeError(f"required here (GPUPOOL_REQUIRE_K8S) but missing: {ENABLE}")
        pytest.skip(ENABLE)
    result = run_kubernetes_bench(nodes=4, pods=24, steady=6, seed=1, dra=True)
    for who in ("kube-scheduler", "gpupool"):
        r = result[who]
        assert r["burst_pods_bound"] == 24 and r["steady_pods_bound"] == 6, (who, r)
        for phase in ("burst_claims", "steady_claims"):
            claims = r[phase]
            assert claims["claims"] > 0 and claims["allocated"] == claims["claims"], (who, claims)
            assert claims["cards_given_twice"] == 0, (who, claims)
