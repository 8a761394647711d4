"""Gangs under one switch: network levels from node labels, required and preferred placement,
refusals that name the level, the request grammar."""

import itertools

import pytest

from gpupool.model import Node, SpecError, Topology, job, make_devices, parse_request
from gpupool.scheduler import ClusterState, Placement, Placer, Unplaceable
from gpupool.scheduler.cycle import run_cycle
from gpupool.scheduler.tenants import Tenant, TenantTree
from gpupool.scheduler.topology import LABELS

_ids = itertools.count()


def fat_tree(blocks: int = 2, leaves: int = 2, nodes: int = 2, cards: int = 8) -> list[Node]:
    """``blocks`` spines x ``leaves`` leaf switches x ``nodes`` servers of ``cards`` A100s."""
    out = []
    for b, leaf, n in itertools.product(range(blocks), range(leaves), range(nodes)):
        name = f"b{b}-l{leaf}-n{n}"
        labels = {LABELS[Topology.BLOCK]: f"b{b}", LABELS[Topology.LEAF]: f"b{b}-l{leaf}"}
        out.append(
            Node(name, 128000, 1024 * 1024, make_devices("A100-80G", cards, node=name), labels)
        )
    return out


def _place(state, spec, gang=1, policy="best-fit"):
    return Placer(policy).place_and_apply(state, job(f"j{next(_ids)}", spec, gang_size=gang))


def _leaves(p: Placement) -> set[str]:
    return {name.rsplit("-", 1)[0] for name in p.node_names}


def test_grammar():
    r = parse_request("gpu=8,topology=prefer-leaf")
    assert (r.topology, r.topology_preferred) == (Topology.LEAF, True)
    assert r.to_spec() == "gpu=8,topology=prefer-leaf" and parse_request(r.to_spec()) == r
    assert parse_request("gpu=8,topology=rack").to_spec() == "gpu=8,topology=rack"
    with pytest.raises(SpecError, match="only a network level can be preferred"):
        parse_request("gpu=8,topology=prefer-nvlink")
    with pytest.raises(SpecError, match="is not one of"):
        parse_request("gpu=8,topology=spine")


def test_a_gang_stays_under_one_leaf_and_takes_the_tightest():
    state = ClusterState(fat_tree())
    assert isinstance(_place(state, "gpu=4"), Placement)  # b0-l0 now has 12 free
    gang = _place(state, "gpu=8,topology=leaf", gang=2)
    assert isinstance(gang, Placement) and len(_leaves(gang)) == 1
    assert _leaves(gang) != {"b0-l0"}  # 12 free there: the 16 go to a leaf that holds them
    small = _place(state, "gpu=4,topology=leaf", gang=2)
    assert _leaves(small) == {"b0-l0"}  # the tightest leaf that holds it


def test_a_spanning_request_stays_under_its_level():
    state = ClusterState(fat_tree())
    wide = _place(state, "gpu=16,topology=leaf")
    assert isinstance(wide, Placement) and len(wide.node_names) == 2
    assert len(_leaves(wide)) == 1
    block = _place(state, "gpu=32,topology=block")
    assert {n[:2] for n in block.node_names} == {"b1"}  # b0 has only 16 free left


def test_refusals_name_the_level_and_the_best_domain():
    state = ClusterState(fat_tree())
    _place(state, "gpu=4")
    refused = _place(state, "gpu=A100-80G:8,topology=leaf", gang=3)
    assert isinstance(refused, Unplaceable)
    assert refused.reason == "0/4 leaves hold 24 free A100-80G cards; best leaf b0-l1 has 16"
    assert state.placements.keys() == {next(iter(state.placements))}  # nothing held back
    unlabelled = ClusterState([Node("x", 64000, 512 * 1024, make_devices("A100-80G", 8, node="x"))])
    no_label = _place(unlabelled, "gpu=8,topology=rack")
    assert no_label.reason == f"no node has a rack label ({LABELS[Topology.RACK]})"


def test_preferred_falls_back_level_by_level_then_anywhere():
    state = ClusterState(fat_tree())
    in_block = _place(state, "gpu=8,topology=prefer-leaf", gang=3)  # 24 > a leaf's 16
    assert isinstance(in_block, Placement)
    assert len({n[:2] for n in in_block.node_names}) == 1 and len(_leaves(in_block)) == 2
    anywhere = _place(state, "gpu=8,topology=prefer-leaf", gang=5)  # 40 > a block's 32
    assert isinstance(anywhere, Placement) and len(anywhere.node_names) == 5
    required = _place(ClusterState(fat_tree()), "gpu=8,topology=block", gang=5)
    assert isinstance(required, Unplaceable)


def test_the_cycle_places_gangs_under_one_leaf():
    tenants = TenantTree([Tenant("company"), Tenant("algo", "company")])
    gangs = [job(f"g{i}", "gpu=8,topology=leaf", gang_size=2, tenant="algo") for i in range(4)]
    result = run_cycle(ClusterState(fat_tree()), [], gangs, tenants, 0)
    assert result.admitted == 4
    for b in result.bindings:
        assert len(_leaves(b.placement)) == 1
    assert len({frozenset(_leaves(b.placement)) for b in result.bindings}) == 4


def test_through_the_api_labels_place_and_refusals_show(tmp_path):
    """Nodes registered with leaf labels; a gang asking for one leaf lands there, one too big
    for any leaf stays pending with the level named; a vNPU job beside them (one engine)."""
    from gpupool.server.settings import Settings
    from tests.support.cluster import node_body, ok, submit
    from tests.support.live import live_server

    settings = Settings(data_dir=tmp_path, log_json=False)
    with live_server(settings) as srv:
        admin = srv.admin()
        ok(admin.post("/api/v1/tenants", json={"name": "algo"}), 201)
        for name, leaf in (("a0", "leaf-a"), ("a1", "leaf-a"), ("b0", "leaf-b")):
            labels = {LABELS[Topology.LEAF]: leaf}
            ok(admin.post("/api/v1/nodes", json=node_body(name, cards=4, labels=labels)))
        npu = node_body("npu", model="Ascend910B-B3", cards=1)
        npu["devices"][0]["mode"] = "mig"
        ok(admin.post("/api/v1/nodes", json=npu))
        gang = submit(admin, "gpu=2,topology=leaf", "algo", gang_size=2)
        big = submit(admin, "gpu=4,topology=leaf", "algo", gang_size=3)
        vnpu = submit(admin, "vnpu=vir10_3c_32g:2", "algo")
        srv.cycle()
        placed = ok(admin.get(f"/api/v1/jobs/{gang['id']}"))
        assert placed["state"] in ("admitted", "running"), placed
        page = ok(admin.get("/api/v1/allocations", params={"state": "active"}))
        (allocation,) = [a for a in page["items"] if a["job_id"] == gang["id"]]
        assert {n["node"] for n in allocation["nodes"]} == {"b0"}  # the tightest leaf: 4 free
        waiting = ok(admin.get(f"/api/v1/jobs/{big['id']}"))
        assert waiting["state"] == "pending"
        assert waiting["reason"].endswith("0/2 leaves hold 12 free cards; best leaf leaf-a has 8")
        assert ok(admin.get(f"/api/v1/jobs/{vnpu['id']}"))["state"] in ("admitted", "running")


def test_a_mask_from_reservations_or_defragmentation_keeps_the_level():
    """What reservations and defragmentation pass the placer (a node mask) narrows the
    domains: a gang under one leaf uses only the nodes it may use."""
    import numpy as np

    state = ClusterState(fat_tree())
    _place(state, "gpu=4")  # b0-l0 has 12 free
    allowed = np.array([not name.startswith("b0-l1") for name in (n.name for n in state.nodes)])
    placer = Placer("best-fit")
    gang = placer.place(state, job("g", "gpu=8,topology=leaf", gang_size=2), allowed, "reserved")
    assert isinstance(gang, Placement) and _leaves(gang) == {"b1-l0"}  # b0-l1 is masked
    only_b0 = np.array([name.startswith("b0") for name in (n.name for n in state.nodes)])
    refused = placer.place(
        state, job("h", "gpu=8,topology=leaf", gang_size=2), only_b0 & allowed, "reserved"
    )
    assert refused.reason == "0/4 leaves hold 16 free cards; best leaf b0-l0 has 12"


def test_a_topology_file_labels_nodes_and_bad_files_are_named(tmp_path, sqlite_server):
    import yaml

    from gpupool.scheduler.topology import labels_from_file
    from tests.support.cli import gpupool
    from tests.support.cluster import node_body, ok

    admin = sqlite_server.admin()
    ok(admin.post("/api/v1/nodes", json=node_body("t0", cards=1, labels={"team": "x"})))
    path = tmp_path / "topo.yaml"
    path.write_text(yaml.safe_dump({"nodes": {"t0": {"leaf": "l7", "block": "b1"}}}))
    env = {"GPUPOOL_SERVER": sqlite_server.url, "GPUPOOL_TOKEN": sqlite_server.admin_token}
    out = gpupool("node", "topology", str(path), env=env)
    assert out.returncode == 0 and "set the topology of 1 node(s)" in out.stdout, out.stderr
    labels = ok(admin.get("/api/v1/nodes/t0"))["labels"]
    assert labels == {"team": "x", LABELS[Topology.LEAF]: "l7", LABELS[Topology.BLOCK]: "b1"}
    for doc, words in (
        ({"racks": {}}, "expected a 'nodes:' mapping"),
        ({"nodes": {"t0": {"spine": "s"}}}, "unknown level 'spine'"),
        ({"nodes": {"t0": {"leaf": ""}}}, "leaf needs a name"),
    ):
        with pytest.raises(SpecError, match=words):
            labels_from_file(doc)
    path.write_text("nodes: [unclosed")
    bad = gpupool("node", "topology", str(path), env=env)
    assert bad.returncode == 2 and "topology file" in bad.stderr and "Traceback" not in bad.stderr


def test_slices_under_one_leaf_count_slices_not_cards():
    """Four vNPUs fit one 910B3 chip: a leaf with one such chip holds them."""
    from gpupool.model import SharingMode

    labels = {LABELS[Topology.LEAF]: "only"}
    npu = make_devices("Ascend910B-B3", 1, mode=SharingMode.MIG, node="npu")
    state = ClusterState([Node("npu", 64000, 512 * 1024, npu, labels)])
    placed = _place(state, "vnpu=vir05_1c_16g:4,topology=leaf")
    assert isinstance(placed, Placement) and [d.device for d in placed.devices] == [0] * 4
