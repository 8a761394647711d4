"""Fixtures for the tests against a real kube-apiserver (see tests/support/kube_cluster.py)."""

import os
from collections.abc import Iterator

import pytest

from gpupool.kube.api import KubeApi
from gpupool.kube.config import parse_config
from gpupool.kube.control_plane import ENABLE, ControlPlane, binaries_available
from gpupool.kube.grants import GrantKey
from gpupool.kube.scheduler import KubeScheduler

NAMESPACES = ["team-a", "team-b", "lab"]
GRANT_KEY = GrantKey.generate()  # the Secret the scheduler and the device plugin share
CONFIG = {
    "namespaces": {"team-a": "team-a", "team-b": "team-b"},
    "tenants": [
        {"name": "company"},
        {"name": "team-a", "parent": "company", "quotas": {"gpu": {"nominal": 16}}},
        {"name": "team-b", "parent": "company", "quotas": {"gpu": {"nominal": 1, "borrowing": 0}}},
    ],
    "grace_s": 0,  # no kubelet here confirms a graceful stop
    "cycle_s": 0.2,
}


@pytest.fixture(scope="session")
def control_plane() -> Iterator[ControlPlane]:
    if not binaries_available():
        if os.environ.get("GPUPOOL_REQUIRE_K8S"):
            raise RuntimeError(f"required here (GPUPOOL_REQUIRE_K8S) but missing: {ENABLE}")
        pytest.skip(ENABLE)
    cp = ControlPlane()
    try:
        cp.start()
        for ns in NAMESPACES:
            cp.namespace(ns)
        cp.grant_edit("team-a")  # the tenant user edits team-a's pods, nothing else
        yield cp
    finally:
        cp.stop()


@pytest.fixture
def kube(control_plane: ControlPlane) -> Iterator[ControlPlane]:
    """The control plane, emptied of nodes and test pods after the test."""
    yield control_plane
    control_plane.clear(NAMESPACES)


@pytest.fixture
def start_scheduler(kube: ControlPlane):
    """Start gpupool's scheduler under its own least-privilege identity; stopped after."""
    started: list[KubeScheduler] = []

    def start(api: KubeApi | None = None, **overrides: object) -> KubeScheduler:
        config = parse_config({**CONFIG, **overrides})
        api = api or KubeApi(kube.gpupool_kubeconfig)
        s = KubeScheduler(api, config, GRANT_KEY, identity=f"test-{len(started)}")
        s.start()
        assert s.wait_synced(10)
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()
