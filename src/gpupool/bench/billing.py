"""``gpupool bench billing``: how long a month's invoices take, on usage shaped like the seed
scenario's (its teams' job sizes, durations and arrival curves), over 30 days, metered as the
server meters (records cut at every hour), for a 40-card pool and for 1,000 cards.

The jobs are not scheduled (each runs from its arrival): a busier month than the pool could
hold, which only makes the invoicing work larger."""

import math
import time
from itertools import pairwise
from pathlib import Path
from typing import Any

from gpupool.billing.catalog import Catalog
from gpupool.billing.invoice import Usage, invoice, month_bounds
from gpupool.model import SpecError
from gpupool.sim.scenario import load_scenario
from gpupool.sim.team_replay import generate_jobs

HOUR = 3600
MONTH = "2026-11"
ZONE = "Asia/Shanghai"


def _records(path: Path, cards: int) -> dict[str, list[Usage]]:
    """Per tenant, the month's usage records for a pool of ``cards`` cards."""
    scenario = load_scenario(path)
    pool = sum(g.count * g.cards for g in scenario.cluster)
    factor = cards / pool
    scenario.days = 30
    for w in scenario.workloads:
        if w.arrivals_per_hour is not None:
            w.arrivals_per_hour *= factor
        if w.service is not None:
            w.service.day = max(1, round(w.service.day * factor))
            w.service.night = max(1, round(w.service.night * factor))
    start, _ = month_bounds(MONTH, ZONE)
    model = scenario.cluster[0].model
    out: dict[str, list[Usage]] = {}
    for sj in generate_jobs(scenario):
        request = sj.job.request
        pct = (request.gpu_share_pct or 100) * max(1, request.gpu_count)
        mem = (request.gpu_mem_mib or 81920) * max(1, request.gpu_count)
        a = start + sj.job.submit_time
        b = a + sj.work_s
        hours = range(math.floor(a / HOUR + 1) * HOUR, math.ceil(b), HOUR)
        cuts = [a, *(float(h) for h in hours), b]
        for lo, hi in pairwise(cuts):
            seconds = math.floor(hi) - math.floor(lo)
            out.setdefault(sj.job.tenant, []).append(
                Usage(model, lo, hi, pct * seconds, mem * seconds)
            )
    return out


def _time_invoices(records: dict[str, list[Usage]]) -> dict[str, Any]:
    catalog = Catalog.default()
    started = time.perf_counter()
    totals = {t: invoice(t, MONTH, rs, catalog, zone=ZONE)["total"] for t, rs in records.items()}
    seconds = time.perf_counter() - started
    return {
        "usage_records": sum(len(rs) for rs in records.values()),
        "tenants": len(records),
        "seconds": round(seconds, 3),
        "totals": totals,
    }


def run_billing_bench(scenario: str, cards: tuple[int, ...] = (40, 1000)) -> dict[str, Any]:
    path = Path(scenario)
    if not path.is_file():
        raise SpecError(f"scenario: {path} not found (run from the repository, or give --scenario)")
    runs = [{"cards": n, **_time_invoices(_records(path, n))} for n in cards]
    first = runs[0]
    return {
        "month": MONTH,
        "zone": ZONE,
        "cards": first["cards"],
        "usage_records": first["usage_records"],
        "seconds": first["seconds"],
        "runs": runs,
    }
