"""A cluster's name in the Kubernetes-mode settings, and on the nodes it reports (pure)."""

import pytest

from gpupool.kube.config import parse_config
from gpupool.kube.ledger import node_report
from gpupool.model import SpecError
from tests.support.kube_objects import node_obj


def test_a_cluster_name_is_a_dns_label_or_nothing():
    assert parse_config({}).cluster == "" and parse_config({"cluster": "east-1"}).cluster
    for bad in ("East", "east/../west", "-east", "e" * 64):
        with pytest.raises(SpecError, match="is not a cluster name"):
            parse_config({"cluster": bad})


def test_a_reported_node_carries_its_clusters_name_never_its_own_label():
    node = node_obj("k1", 2, labels={"gpupool.io/cluster": "west"})  # a label set in kubectl
    assert node_report(node, "east")["labels"]["gpupool.io/cluster"] == "east"
    assert "gpupool.io/cluster" not in node_report(node)["labels"]
