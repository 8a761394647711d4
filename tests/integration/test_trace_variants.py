"""Variants of an openb pod list (sharing-, multi-GPU-, CPU- and GPU-type-heavy mixes)."""

import json
import random

import pytest

from gpupool.model import Device, Node, SharingMode, SpecError, Vendor
from gpupool.sim.traces.variants import STANDARD, Variant, category, make_variant, mix
from tests.support.cli import gpupool

HEADER = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
HEADER += "deletion_time,scheduled_time"


def _row(name: str, cpu: int, gpus: int, milli: int) -> dict[str, str]:
    return {
        "name": name,
        "cpu_milli": str(cpu),
        "memory_mib": "8192",
        "num_gpu": str(gpus),
        "gpu_milli": str(milli),
        "gpu_spec": "",
        "qos": "LS",
    }


def _source(n: int = 400) -> list[dict[str, str]]:
    """A default-like mix: mostly one card or a share, a few multi-card and CPU-only pods."""
    rng = random.Random(1)
    rows = []
    for i in range(n):
        r = rng.random()
        if r < 0.45:
            rows.append(_row(f"w{i}", 8000, 1, 1000))
        elif r < 0.85:
            rows.append(_row(f"s{i}", 4000, 1, rng.choice([250, 500, 300])))
        elif r < 0.88:
            rows.append(_row(f"m{i}", 32000, rng.choice([2, 4, 8]), 1000))
        else:
            rows.append(_row(f"c{i}", 16000, 0, 0))
    return rows


def _nodes() -> list[Node]:
    def node(name: str, model: str, cards: int, cpu: int) -> Node:
        devices = tuple(
            Device(i, model, Vendor.NVIDIA, 16384, mode=SharingMode.SHARE) for i in range(cards)
        )
        return Node(name, cpu, 262144, devices)

    return [node(f"a{i}", "T4", 8, 96000) for i in range(6)] + [
        node(f"b{i}", "V100M16", 2, 16000) for i in range(3)
    ]


@pytest.mark.parametrize("variant", STANDARD, ids=lambda v: v.name)
def test_each_variant_reaches_its_target_mix(variant):
    rows = _source()
    made = make_variant(rows, variant, _nodes(), seed=3)
    assert len(made) == len(rows)
    measured = mix(made)
    assert measured[variant.kind] == pytest.approx(variant.fraction, abs=0.06)
    # every pod of a variant is a pod of the source (a copy), under a name of its own
    source = {(r["cpu_milli"], r["num_gpu"], r["gpu_milli"]) for r in rows}
    assert all((r["cpu_milli"], r["num_gpu"], r["gpu_milli"]) in source for r in made)
    assert len({r["name"] for r in made}) == len(made)
    assert made == make_variant(rows, variant, _nodes(), seed=3)  # seeded
    assert rows == _source()  # the source rows are not changed


def test_untargeted_categories_keep_their_relative_shares():
    rows = _source(2000)
    made = make_variant(rows, Variant("cpu", 0.5), _nodes(), seed=0)
    before, after = mix(rows), mix(made)
    assert after["cpu"] == pytest.approx(0.5, abs=0.03)
    assert after["gpushare"] == pytest.approx(before["gpushare"], abs=0.04)


def test_gpuspec_names_a_type_that_can_hold_the_pod():
    rows = _source()
    made = make_variant(rows, Variant("gpuspec", 0.5), _nodes(), seed=2)
    typed = [r for r in made if r["gpu_spec"]]
    assert typed and all(category(r) != "cpu" for r in typed)
    # the V100M16 nodes have 2 cards and 16 CPUs: pods with more stay on T4
    for r in typed:
        if int(r["num_gpu"]) > 2 or int(r["cpu_milli"]) > 16000:
            assert r["gpu_spec"] == "T4"
    assert {r["gpu_spec"] for r in typed} == {"T4", "V100M16"}


def test_bad_variants_are_refused_with_a_reason():
    rows = [r for r in _source() if category(r) != "multi"]
    with pytest.raises(SpecError, match="no multi pods"):
        make_variant(rows, Variant("multigpu", 0.5), _nodes())
    with pytest.raises(SpecError, match="between 0 and 1"):
        make_variant(rows, Variant("cpu", 1.5), _nodes())
    with pytest.raises(SpecError, match="is not one of"):
        make_variant(rows, Variant("bigjobs", 0.5), _nodes())


def test_variants_command_writes_a_family_that_simulate_family_runs(tmp_path):
    nodes = tmp_path / "nodes.csv"
    nodes.write_text(
        "sn,cpu_milli,memory_mib,gpu,model\n"
        + "".join(f"n{i},64000,262144,4,T4\n" for i in range(4))
    )
    pods = tmp_path / "pods.csv"
    body = [
        ",".join([r["name"], r["cpu_milli"], r["memory_mib"], r["num_gpu"], r["gpu_milli"], ""])
        + ",LS,Running,0,1,0"
        for r in _source(60)
    ]
    pods.write_text(HEADER + "\n" + "\n".join(body) + "\n")
    out = tmp_path / "family"
    made = gpupool(
        "simulate", "variants", "--out", str(out), "--nodes", str(nodes), "--pods", str(pods),
        "--json",
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    report = json.loads(made.stdout)
    assert set(report) == {"source", *(v.name for v in STANDARD)}
    assert report["gpushare80"]["gpushare"] == pytest.approx(0.8, abs=0.15)
    assert sorted(p.name for p in out.iterdir()) == sorted(
        f"openb_pod_list_{v.name}.csv" for v in STANDARD
    )
    family = gpupool(
        "simulate", "family", "--dir", str(out), "--nodes", str(nodes),
        "--policies", "paper-best-fit,fgd", "--seeds", "1-2", "--json",
    )  # fmt: skip
    assert family.returncode == 0, family.stderr
    assert set(json.loads(family.stdout)["files"]) == {v.name for v in STANDARD}
    bad = gpupool(
        "simulate", "variants", "--out", str(out), "--nodes", str(nodes), "--pods", str(nodes)
    )
    assert bad.returncode == 2 and "missing column(s) name" in bad.stderr
    assert "Traceback" not in bad.stderr
    # a corrupt row is skipped with its line number, never a traceback
    pods.write_text(pods.read_text() + "broken,4000,8192,1,abc,,LS,Running,0,1,0\n")
    skipped = gpupool(
        "simulate", "variants", "--out", str(tmp_path / "again"), "--nodes", str(nodes),
        "--pods", str(pods), "--json",
    )  # fmt: skip
    assert skipped.returncode == 0, skipped.stderr
    assert "line 62" in skipped.stderr and "gpu_milli='abc'" in skipped.stderr
    assert "Traceback" not in skipped.stderr
    assert json.loads(skipped.stdout)["source"]["pods"] == 60
