"""Ascend vNPU templates: the tables against Huawei's documented resources and combinations,
and scheduling vNPUs like MIG instances (pack, refuse, release, bill, quota)."""

import itertools

import pytest

from gpupool.model import SharingMode, SpecError, job, parse_request
from gpupool.scheduler import ClusterState, Placement, Placer, Unplaceable
from gpupool.scheduler.session import MIG_PERCENT
from gpupool.sharing import models_with_profile, table_for
from gpupool.sharing.vnpu import MAX_VNPUS_PER_CHIP, VNPU_TABLES, vnpu_id
from tests.support.builders import node

# Per chip: AI Cores, AI CPUs (MindCluster "Virtualization Rules"; HAMi's ascend configuration)
CHIPS = {
    "Ascend910B-B2": (24, 6),
    "Ascend910B-B3": (20, 7),
    "Ascend910B-B4": (20, 7),
    "Ascend310P": (8, 7),
}


@pytest.mark.parametrize("model", sorted(CHIPS))
def test_every_template_name_states_its_own_resources(model):
    """``vir10_3c_32g``: 10 AI Cores, 3 AI CPUs, 32 GB; ``vir04``: 4 cores (as many AI CPUs
    on the 310P); the vNPU type says the same (``Ascend910-10c.3cpu.32g``)."""
    table = VNPU_TABLES[model]
    assert (table.compute_slices, table.ai_cpu) == CHIPS[model]
    for t in table.profiles:
        parts = t.name.removeprefix("vir").split("_")
        assert int(parts[0]) == t.compute_slices
        cpus = next((int(p[:-1]) for p in parts[1:] if p.endswith("c")), t.compute_slices)
        assert cpus == t.ai_cpu
        gb = next((int(p[:-1]) for p in parts[1:] if p.endswith("g")), None)
        if gb is not None:
            assert t.memory_mib == gb * 1024
        assert f"-{t.compute_slices}c" in t.vnpu_type
        # memory in proportion to AI Cores: it never binds before the cores do
        assert t.memory_mib * table.compute_slices <= table.memory_mib * t.compute_slices


def _max_count(model: str, name: str) -> int:
    table = VNPU_TABLES[model]
    return max(n for n in range(MAX_VNPUS_PER_CHIP + 1) if table.holds([name] * n))


def test_how_many_of_each_template_one_chip_holds():
    # 910B3 / 910B4: "每卡切分数" 4 of the 5-core template, 2 of the 10-core one
    assert _max_count("Ascend910B-B3", "vir05_1c_16g") == 4
    assert _max_count("Ascend910B-B3", "vir10_3c_32g") == 2
    assert _max_count("Ascend910B-B4", "vir05_1c_8g") == 4
    assert _max_count("Ascend910B-B4", "vir10_3c_16g") == 2
    # 910B2: 24 cores hold 8 vir03 by cores, but only 6 AI CPUs -> 6
    assert _max_count("Ascend910B-B2", "vir03_1c_8g") == 6
    assert _max_count("Ascend910B-B2", "vir06_1c_16g") == 4
    assert _max_count("Ascend910B-B2", "vir12_3c_32g") == 2
    # 310P: 8 cores, 7 AI CPUs: vir04 takes 4 of them, so one vir04 leaves room for 3
    assert _max_count("Ascend310P", "vir04") == 1
    assert _max_count("Ascend310P", "vir04_3c") == 2
    assert _max_count("Ascend310P", "vir02_1c") == 4
    assert _max_count("Ascend310P", "vir01") == 7


def test_documented_combinations():
    p310 = VNPU_TABLES["Ascend310P"]
    # MindCluster's worked example: after vir04 the chip shows 4/8 AI Cores and 3/7 AI CPUs
    # free, and takes vir02_1c + vir01 + vir01 beside it
    assert p310.holds(["vir04", "vir02_1c", "vir01", "vir01"])
    assert not p310.holds(["vir04", "vir02_1c", "vir01", "vir01", "vir01"])
    assert p310.holds(["vir04", "vir04_3c"]) and not p310.holds(["vir04", "vir04"])
    # two vir01 share one two-core vGroup; a lone vir01 holds its vGroup's two cores
    assert p310.holds(["vir02", "vir02", "vir02", "vir01"])  # 4 vGroups, 7 AI CPUs
    assert not p310.holds(["vir02", "vir02", "vir02", "vir02"])  # 8 AI CPUs
    assert p310.holds(["vir04_3c", "vir02_1c", "vir01"])
    b3 = VNPU_TABLES["Ascend910B-B3"]
    assert b3.holds(["vir10_3c_32g", "vir05_1c_16g", "vir05_1c_16g"])
    assert not b3.holds(["vir10_3c_32g", "vir10_3c_32g", "vir05_1c_16g"])
    b2 = VNPU_TABLES["Ascend910B-B2"]
    assert b2.holds(["vir12_3c_32g", "vir06_1c_16g", "vir03_1c_8g", "vir03_1c_8g"])  # 6 CPUs
    assert not b2.holds(["vir12_3c_32g"] + ["vir03_1c_8g"] * 4)  # 7 AI CPUs


@pytest.mark.parametrize("model", sorted(CHIPS))
def test_take_and_release_are_inverse_and_order_free(model):
    """Occupancy is counters, not positions: any order of the same templates ends in the same
    state, and releasing them all returns to an empty chip."""
    table = VNPU_TABLES[model]
    for combo in itertools.combinations_with_replacement([p.name for p in table.profiles], 3):
        if not table.holds(list(combo)):
            continue
        ends = set()
        for order in itertools.permutations(combo):
            occupied = 0
            for name in order:
                occupied = table.profile(name).take(occupied)
            ends.add(occupied)
            for name in reversed(order):
                occupied = table.profile(name).release(occupied)
            assert occupied == 0
        assert len(ends) == 1
    with pytest.raises(SpecError, match="holds no"):
        table.profiles[0].release(0)


def test_vnpu_ids_follow_npu_smi():
    assert vnpu_id(0, 0) == 100 and vnpu_id(1, 7) == 123
    with pytest.raises(SpecError):
        vnpu_id(0, 8)


def test_request_grammar_and_errors():
    r = parse_request("vnpu=vir05_1c_16g:2,cpu=2")
    assert r.is_vnpu and r.gpu == 2 and r.to_spec() == "vnpu=vir05_1c_16g:2,cpu=2000m"
    assert parse_request(r.to_spec()) == r
    for bad, words in (
        ("vnpu=3g.40gb", "not a vNPU template"),
        ("mig=vir04", "use vnpu=vir04"),
        ("vnpu=vir04,mig=1g.10gb", "cannot be combined with mig"),
        ("vnpu=vir04,gpu_mem=4GiB", "cannot be combined"),
        ("vnpu=vir04:0", "at least 1"),
    ):
        with pytest.raises(SpecError, match=words):
            parse_request(bad)
    with pytest.raises(SpecError, match="not a template of any Ascend chip"):
        models_with_profile("vir99")


def _vnpu_state(model: str = "Ascend910B-B3", cards: int = 2) -> ClusterState:
    return ClusterState([node("a", model, cards, mode=SharingMode.MIG)])


_ids = itertools.count()


def _place(state, spec, policy="best-fit"):
    return Placer(policy).place_and_apply(state, job(f"j{next(_ids)}", spec))


def test_vnpus_pack_onto_one_chip_and_the_next_waits_for_room():
    state = _vnpu_state()
    first = _place(state, "vnpu=vir10_3c_32g")
    assert isinstance(first, Placement)
    (g,) = first.devices
    assert (g.mig_profile, g.mig_start, g.mem_mib) == ("vir10_3c_32g", 0, 32768)
    two = _place(state, "vnpu=vir05_1c_16g:2")
    assert [d.device for d in two.devices] == [g.device, g.device]  # best-fit fills a chip
    # the first chip is full (20/20 cores); a 10-core vNPU goes to the other
    other = _place(state, "vnpu=vir10_3c_32g")
    assert other.devices[0].device != g.device
    assert isinstance(_place(state, "vnpu=vir10_3c_32g"), Placement)
    refused = _place(state, "vnpu=vir05_1c_16g")
    assert isinstance(refused, Unplaceable)
    state.release(two.job_id)
    again = _place(state, "vnpu=vir10_3c_32g")
    assert again.devices[0].device == g.device  # the two 5-core vNPUs' room, as one


def test_vnpu_templates_only_go_to_their_chip_and_mode():
    state = ClusterState(
        [
            node("b2", "Ascend910B-B2", 1, mode=SharingMode.MIG),
            node("b3", "Ascend910B-B3", 1, mode=SharingMode.MIG),
            node("whole", "Ascend910B-B3", 1),
            node("nv", "A100-80G", 1, mode=SharingMode.MIG),
        ]
    )
    placed = _place(state, "vnpu=vir12_3c_32g")
    assert placed.node_names == ("b2",)
    refused = _place(state, "vnpu=vir12_3c_32g:2")
    assert isinstance(refused, Unplaceable)
    assert _place(state, "vnpu=vir05_1c_16g").node_names == ("b3",)
    assert _place(state, "mig=1g.10gb").node_names == ("nv",)
    assert _place(state, "gpu=Ascend910B:1").node_names == ("whole",)  # the family name


def test_a_vnpu_is_billed_and_counted_as_its_share_of_the_chip():
    assert MIG_PERCENT["vir10_3c_32g"] == 50 and MIG_PERCENT["vir05_1c_16g"] == 25
    assert MIG_PERCENT["vir04"] == 50 and MIG_PERCENT["vir12_3c_32g"] == 50
    assert table_for("Ascend910B-B3") is VNPU_TABLES["Ascend910B-B3"]


def test_one_quota_spans_nvidia_cards_and_ascend_vnpus():
    """A tenant's card quota counts a whole A100 as 100 and a vir10_3c_32g as 50 (half its
    chip's AI Cores): 1.5 cards hold one of each, and nothing more."""
    from gpupool.model import Job, Node, make_devices
    from gpupool.scheduler.cycle import run_cycle
    from gpupool.scheduler.tenants import Quota, Tenant, TenantTree

    nodes = [
        Node("nv", 64000, 512 * 1024, make_devices("A100-80G", 2, node="nv")),
        Node(
            "npu",
            64000,
            512 * 1024,
            make_devices("Ascend910B-B3", 2, mode=SharingMode.MIG, node="npu"),
        ),
    ]
    tenants = TenantTree(
        [Tenant("company"), Tenant("algo", "company", {"gpu": Quota.cards(1.5, borrowing=0)})]
    )
    wanted = [
        Job("whole", parse_request("gpu=A100-80G:1"), tenant="algo"),
        Job("vnpu", parse_request("vnpu=vir10_3c_32g"), tenant="algo", submit_time=1),
        Job("more", parse_request("vnpu=vir05_1c_16g"), tenant="algo", submit_time=2),
    ]
    result = run_cycle(ClusterState(nodes), [], wanted, tenants, 0)
    assert {b.job_id for b in result.bindings} == {"whole", "vnpu"}
    assert list(result.pending) == ["more"]
    assert "quota" in str(result.pending["more"])


def test_a_vnpu_is_metered_and_invoiced_as_its_share_of_the_chip():
    """Metered at its share of the chip's AI Cores; priced at the chip's price, or at the
    family's (``Ascend910B``) when only that is set."""
    from gpupool.billing.catalog import Catalog, Price
    from gpupool.billing.invoice import Usage, invoice, month_bounds
    from gpupool.server.metering import Card, meter

    placement = {
        "nodes": [
            {
                "node": "npu",
                "cpu_millis": 0,
                "devices": [
                    {"device": 0, "compute_pct": 0, "mem_mib": 32768, "exclusive": False,
                     "mig_profile": "vir10_3c_32g", "mig_start": 0},
                ],
            }
        ]
    }  # fmt: skip
    (record,) = meter(placement, {("npu", 0): Card("Ascend910B-B3", 65536)}, 3600)
    assert record["compute_pct_seconds"] == 50 * 3600 and record["device_seconds"] == 0
    start, _ = month_bounds("2026-11")
    usage = Usage("Ascend910B-B3", start, start + 720 * 3600, 50 * 720 * 3600, 0)
    family = Catalog([Price("Ascend910B", 2000 * 100)])
    assert invoice("algo", "2026-11", [usage], family)["total"] == "1000.00"
    own = Catalog([Price("Ascend910B", 2000 * 100), Price("Ascend910B-B3", 3000 * 100)])
    assert invoice("algo", "2026-11", [usage], own)["total"] == "1500.00"
    with pytest.raises(SpecError, match="no price for Ascend910B-B3"):
        invoice("algo", "2026-11", [usage], Catalog([Price("A100-80G", 1)]))
