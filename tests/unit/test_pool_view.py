"""The dashboard's counting rules (pure): every card is allocated, free or unavailable, once;
a slice of another team hides tenant and job; utilisation uses fresh telemetry only; history
buckets average samples; a job's estimate prices its records at the price in force."""

from fractions import Fraction

from hypothesis import given
from hypothesis import strategies as st

from gpupool.billing.catalog import Catalog, Price
from gpupool.billing.estimate import job_estimate
from gpupool.server.pool_view import Card, Live, by_model, history, holders, tiles, utilisation

NOW = 1_800_000_000.0


def card(node: str, i: int, model="A100-80G", mode="whole", **kw) -> Card:
    state = kw.pop("node_state", "ready")
    return Card(node, "default", i, model, "nvidia", mode, 81920, kw.pop("healthy", True),
                state, kw.pop("schedulable", True), kw.pop("telemetry", {}),
                kw.pop("want_mode", None))  # fmt: skip


def live(job: int, tenant: str, *devices: tuple[str, int], pct: int = 100) -> Live:
    nodes: dict[str, list] = {}
    for n, d in devices:
        nodes.setdefault(n, []).append({"device": d, "compute_pct": pct, "mem_mib": 1024})
    placement = {"nodes": [{"node": n, "devices": ds} for n, ds in nodes.items()]}
    return Live(job, tenant, False, placement)


@given(
    st.lists(
        st.tuples(st.booleans(), st.sampled_from(["ready", "lost"]), st.booleans(), st.booleans()),
        min_size=1,
        max_size=30,
    )
)
def test_each_card_counts_once(flags):
    cards, allocs = [], []
    for i, (healthy, state, schedulable, held) in enumerate(flags):
        cards.append(card("n", i, healthy=healthy, node_state=state, schedulable=schedulable))
        if held:
            allocs.append(live(i + 1, "algo", ("n", i)))
    held = holders(allocs, lambda _: True)
    (row,) = by_model(cards, held)
    assert row["allocated"] + row["free"] + row["unavailable"] == row["total"] == len(flags)
    assert row["allocated"] == sum(1 for f in flags if f[3])
    assert utilisation(cards, held, NOW)["allocated"] == row["allocated"]


def test_another_teams_slices_hide_tenant_and_job():
    cards = [card("n", 0, mode="share")]
    allocs = [live(1, "algo", ("n", 0), pct=50), live(2, "infer", ("n", 0), pct=50)]
    (tile,) = tiles(cards, holders(allocs, lambda t: t == "algo"), NOW)
    assert [(h["tenant"], h["job_id"]) for h in tile["holders"]] == [("algo", 1), (None, None)]
    assert tile["granted_mib"] == 2048 and tile["state"] == "allocated"


def test_a_card_switching_mode_takes_no_work_and_says_so():
    cards = [card("n", 0, mode="mig", want_mode="share"), card("n", 1, mode="mig", want_mode="mig")]
    switching, settled = tiles(cards, {}, NOW)
    assert (switching["state"], switching["switching_to"]) == ("unavailable", "share")
    assert (settled["state"], settled["switching_to"]) == ("free", None)


def test_only_fresh_telemetry_says_how_busy_cards_are():
    fresh = {"util_pct": 80.0, "time": NOW - 10}
    stale = {"util_pct": 10.0, "time": NOW - 3600}
    cards = [card("n", 0, telemetry=fresh), card("n", 1, telemetry=stale), card("n", 2)]
    u = utilisation(cards, {}, NOW)
    assert u["used_pct"] == 80.0 and u["reporting"] == 1


def test_history_averages_the_samples_of_each_bucket():
    rows = [
        {"time": 10.0, "cards": 4, "allocated": 2, "util_sum": 100.0, "util_n": 2},
        {"time": 10.0, "cards": 4, "allocated": 4, "util_sum": 300.0, "util_n": 4},  # 2nd model
        {"time": 15.0, "cards": 8, "allocated": 2, "util_sum": 0.0, "util_n": 0},
    ]
    points = history(rows, 0.0, 40.0, 2)
    assert points[0] == {"time": 20.0, "allocated_pct": 50.0, "used_pct": 66.7}
    assert points[1]["allocated_pct"] is None


def test_a_jobs_estimate_uses_the_price_in_force_when_each_record_started():
    cat = Catalog([Price("A100-80G", 72000), Price("A100-80G", 144000, effective_from=1000.0)])
    records = [
        {"model": "A100-80G", "start": 0.0, "compute_pct_seconds": 100 * 3600},
        {"model": "A100-80G", "start": 2000.0, "compute_pct_seconds": 50 * 3600},
        {"model": "cpu", "start": 0.0, "compute_pct_seconds": 0},
    ]
    out = job_estimate(records, cat)
    assert out["card_hours"] == 1.5
    assert out["cost_fen"] == round(Fraction(72000, 720) + Fraction(144000, 720) / 2)
    assert (
        job_estimate([{"model": "X9", "start": 0.0, "compute_pct_seconds": 1}], cat)["cost_fen"]
        is None
    )
