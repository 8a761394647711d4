"""The fat-tree gang simulation: the same arrivals for every mode, what each mode changes, the
traffic measure, a background from timed pods, the CLI."""

import json
import subprocess
import sys

from gpupool.model import ResourceRequest, SliceKind
from gpupool.scheduler import DeviceGrant, NodeGrant, Placement
from gpupool.sim.topology_sim import Tree, background_from_pods, compare, cross_spine_pairs
from gpupool.sim.traces.openb import Pod

SMALL = Tree(leaves=2, nodes_per_leaf=4, cards=8)


def test_cross_spine_pairs_count_gpu_pairs_under_different_leaves():
    def grant(node: str, cards: int) -> NodeGrant:
        return NodeGrant(
            node, 0, 0, tuple(DeviceGrant(node, i, 100, 1, True) for i in range(cards))
        )

    one_leaf = Placement("a", (grant("l00-n00", 8), grant("l00-n01", 8)), "t")
    assert cross_spine_pairs(one_leaf) == (0, 120)
    split = Placement("b", (grant("l00-n00", 8), grant("l01-n00", 8)), "t")
    assert cross_spine_pairs(split) == (64, 120)


def test_modes_trade_waiting_for_locality_on_the_same_arrivals():
    result = compare(SMALL, [3, 4], jobs=40, load=0.7)
    blind, prefer, leaf = (result["median"][m] for m in ("blind", "prefer-leaf", "leaf"))
    assert blind["placed"] == prefer["placed"] == leaf["placed"] == 40
    # only the 64-GPU gangs, larger than a 32-GPU leaf, cross the spine when leaf is required
    assert blind["cross_spine_share"] > prefer["cross_spine_share"] >= leaf["cross_spine_share"]
    assert blind["gangs_over_leaves"] > prefer["gangs_over_leaves"] >= leaf["gangs_over_leaves"]
    assert leaf["wait_p95_min"] >= prefer["wait_p95_min"]
    again = compare(SMALL, [3, 4], jobs=40, load=0.7)
    assert again["median"] == result["median"]  # deterministic per seed


def _pod(name: str, gpu: int, created: int | None, run: int | None) -> Pod:
    return Pod(name, ResourceRequest(gpu=gpu, cpu_millis=1000), gpu * 1000, created, run)


def test_background_keeps_timed_whole_card_pods_compressed_to_the_load():
    pods = [_pod(f"p{i}", 1 + i % 2, 1000 + 600 * i, 3600) for i in range(100)]
    pods += [_pod("untimed", 1, None, None), _pod("too-big", 16, 2000, 3600)]
    pods.append(Pod("share", ResourceRequest(gpu=1, gpu_share_pct=50), 500, 3000, 3600))
    assert pods[-1].request.kind is SliceKind.SHARE
    bg = background_from_pods(pods, SMALL, load=0.5, span_s=10**9)
    # the window starts at the first percentile of arrivals (openb's early outliers)
    assert {a.id for a in bg} == {f"bg-p{i}" for i in range(1, 100)}
    assert not any(a.gang for a in bg)
    offered = sum(a.gpus * a.duration for a in bg) / max(a.at for a in bg)
    assert abs(offered / SMALL.capacity - 0.5) < 0.05
    assert background_from_pods(pods, SMALL, load=0.0, span_s=10**9) == []


def test_cli_prints_json_and_names_a_missing_pod_list(tmp_path):
    argv = [sys.executable, "-m", "gpupool.cli.main", "simulate", "topology"]
    small = ["--leaves", "2", "--nodes-per-leaf", "4", "--jobs", "20", "--seeds", "1", "--json"]
    done = subprocess.run(argv + small, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert set(result["median"]) == {"blind", "prefer-leaf", "leaf"}
    missing = tmp_path / "nope.csv"
    bad = subprocess.run(
        argv + small + ["--background", "0.3", "--pods", str(missing)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 2 and f"{missing} is not a file" in bad.stderr
    assert "Traceback" not in bad.stderr
