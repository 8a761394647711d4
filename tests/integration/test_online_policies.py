"""Online-ness, locked: a policy declared online (``gpupool policies``) decides each pod from
the pods that have arrived only. Replaying the same bag with the pods not yet arrived at a
cut permuted must change none of its decisions before the cut, for every online policy of
the FGD protocol and several seeds; the clairvoyant look-ahead, which reads the next pods,
must fail the same check (else the check proves nothing)."""

import random

import pytest

from gpupool.scheduler.catalog import CATALOG
from gpupool.sim.fgd_protocol import CLAIRVOYANT, replay, workload_bag
from gpupool.sim.fgd_report import PROTOCOL_POLICIES
from gpupool.sim.traces.openb import load_nodes, load_pods

ONLINE = [p.name for p in CATALOG if p.online and p.name in PROTOCOL_POLICIES]
SEEDS = (3, 7)
CUTS = (20, 60, 100, 140, 180)


@pytest.fixture(scope="module")
def trace(tmp_path_factory):
    """28 nodes (8 and 2 cards) and 400 pods, most of them shares of a card, some of 1, 2, 4
    and 8 cards: enough choice that reading the next pods changes decisions."""
    tmp = tmp_path_factory.mktemp("online")
    nodes = tmp / "nodes.csv"
    nodes.write_text(
        "sn,cpu_milli,memory_mib,gpu,model\n"
        + "".join(f"big{i},96000,786432,8,V100M32\n" for i in range(16))
        + "".join(f"small{i},32000,131072,2,T4\n" for i in range(12))
    )
    rng = random.Random(0)
    shapes = [(1, 250), (1, 500), (1, 750), (1, 1000), (2, 1000), (4, 1000), (8, 1000)]
    weights = [30, 25, 15, 20, 5, 3, 2]
    rows = []
    for i in range(400):
        gpus, milli = rng.choices(shapes, weights)[0]
        rows.append(f"p{i},{rng.choice([2000, 4000, 8000])},8192,{gpus},{milli},,LS,Running,0,1,0")
    pods = tmp / "pods.csv"
    pods.write_text(
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
        "deletion_time,scheduled_time\n" + "\n".join(rows) + "\n"
    )
    return load_nodes(nodes)[0], load_pods(pods)[0]


def _decisions(trace, policy: str, seed: int, bag) -> list:
    nodes, pods = trace
    out: list = []
    replay(nodes, pods, PROTOCOL_POLICIES[policy], seed, bag=bag, decisions=out)
    return out


def _changed_before_cuts(trace, policy: str) -> list[tuple[int, int]]:
    """(seed, cut) pairs where permuting the pods from the cut on changed a decision on a
    pod before it."""
    nodes, pods = trace
    capacity = sum(len(n.devices) for n in nodes) * 1000
    changed = []
    for seed in SEEDS:
        bag = workload_bag(pods, capacity, seed, 1.3)
        base = _decisions(trace, policy, seed, bag)
        for cut in CUTS:
            future = bag[cut:]
            random.Random(f"{seed}-{cut}").shuffle(future)
            other = _decisions(trace, policy, seed, bag[:cut] + future)
            if other[:cut] != base[:cut]:
                changed.append((seed, cut))
    return changed


def test_the_check_covers_the_online_policies():
    assert {"fgd", "fgd-lookahead", "random", "paper-best-fit", "first-fit"} <= set(ONLINE)
    assert CLAIRVOYANT not in ONLINE


@pytest.mark.parametrize("policy", ONLINE)
def test_an_online_policy_never_reads_pods_that_have_not_arrived(trace, policy):
    assert _changed_before_cuts(trace, policy) == []


def test_the_clairvoyant_look_ahead_fails_the_same_check(trace):
    assert _changed_before_cuts(trace, CLAIRVOYANT) != []
