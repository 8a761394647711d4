"""Whether a node can run service replicas, as its agent says (issue 59, finding 6): a root
agent without ``nft`` cannot publish a replica's port into its tenant's walled namespace, so
its node carries ``gpupool.io/replicas: no: nft is missing ...`` and its description (``gpupool
up``'s banner) says service replicas cannot run there."""

import os

import pytest

from gpupool.agent import firewall
from gpupool.agent.workloads import IsolationConfig, Launcher
from gpupool.model.labels import REPLICAS_LABEL


def _launcher(tmp_path, mode: str) -> Launcher:
    config = IsolationConfig(mode=mode, work_dir=tmp_path / "work", cgroups=False)
    return Launcher("n1", tmp_path / "state", config, {}, None, 4096)


@pytest.mark.skipif(os.geteuid() != 0, reason="tenant users need root")
def test_a_root_agent_without_nft_says_replicas_cannot_run_on_its_node(tmp_path, monkeypatch):
    real = firewall.shutil.which
    monkeypatch.setattr(firewall.shutil, "which", lambda n: None if n == "nft" else real(n))
    launcher = _launcher(tmp_path, "tenant-users")
    said = launcher.labels()[REPLICAS_LABEL]
    assert said == "no: nft is missing (Debian/Ubuntu: apt-get install nftables)", said
    line = launcher.describe()
    assert "NOT walled" in line and "service replicas cannot run here" in line, line
    assert "apt-get install nftables" in line


@pytest.mark.skipif(os.geteuid() != 0, reason="tenant users need root")
def test_nodes_that_can_run_replicas_say_yes(tmp_path):
    if firewall.shutil.which("nft") is not None and firewall.shutil.which("ip") is not None:
        assert _launcher(tmp_path, "tenant-users").labels()[REPLICAS_LABEL] == "yes"
    # without tenant users, replicas run on the host's network: their ports are the agent's
    assert _launcher(tmp_path / "b", "none").labels()[REPLICAS_LABEL] == "yes"
