"""Self-contained HTML reports and CSV series for simulation results."""

import csv
import io
from pathlib import Path

from jinja2 import Environment, PackageLoader

from gpupool import __version__
from gpupool.sim.charts import line_chart
from gpupool.sim.team_replay import MODES

_ENV = Environment(loader=PackageLoader("gpupool.sim", "templates"), autoescape=True)


def fgd_report_html(result: dict) -> str:
    policies = result["policies"]
    alloc = [(n, [(a, b) for a, b, _ in p["curve"]]) for n, p in policies.items()]
    frag = [(n, [(a, c) for a, _, c in p["curve"]]) for n, p in policies.items()]
    rows = [
        [
            n,
            p["unallocated_gpus_at_100"],
            p["alloc_ratio_at_100"],
            p["alloc_ratio_at_130"],
            p["frag_amount_at_100"],
            p["failed_pods"],
        ]
        for n, p in policies.items()
    ]
    curve_rows = [[n, *point] for n, p in policies.items() for point in p["curve"]]
    return _ENV.get_template("report.html.j2").render(
        title="FGD protocol replay",
        subtitle=f"{result['nodes']} nodes, {result['gpus']} GPUs, {result['pods']} pods, "
        f"seeds {result['seeds']}, tune {result['tune']} — medians over seeds",
        charts=[
            line_chart("GPU allocation ratio", alloc, "arrived workload", "allocated / capacity"),
            line_chart("Fragmentation amount", frag, "arrived workload", "fragmented / capacity"),
        ],
        tables=[
            {
                "title": "At 100% arrived workload",
                "header": [
                    "policy",
                    "unallocated GPUs",
                    "alloc @100%",
                    "alloc @130%",
                    "frag @100%",
                    "failed pods",
                ],
                "rows": rows,
            },
            {
                "title": "Curves",
                "header": ["policy", "arrived", "alloc ratio", "frag amount"],
                "rows": curve_rows,
            },
        ],
        version=__version__,
    )


def fgd_curves_csv(result: dict) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["policy", "arrived", "alloc_ratio", "frag_amount"])
    for name, p in result["policies"].items():
        for point in p["curve"]:
            writer.writerow([name, *point])
    return out.getvalue()


def write(path: Path, text: str) -> None:
    path.write_text(text, encoding="utf-8")


def scenario_report_html(result: dict) -> str:
    cards = result["cards"]
    series = [
        (mode, [(h, used / cards) for h, used in result[mode]["cards_in_use"]]) for mode in MODES
    ]
    rows = []
    for mode in MODES:
        for team, t in result[mode]["tenants"].items():
            rows.append(
                [
                    mode,
                    team,
                    t["jobs"],
                    t["started"],
                    t["finished"],
                    t["queue_delay_p50_s"],
                    t["queue_delay_p95_s"],
                ]
            )
    summary = [
        [
            mode,
            f"{result[mode]['gpu_utilization']:.1%}",
            result[mode]["queue_delay_p95_s"],
            result[mode]["preemptions"],
        ]
        for mode in MODES
    ]
    return _ENV.get_template("report.html.j2").render(
        title=f"Static partition vs pooled: {result['scenario']}",
        subtitle=f"{cards} cards, {result['jobs']} jobs, the same jobs in every mode "
        "(static_partition: servers of each team's own; static_quota: per-team caps on one "
        "pool; pooled: borrowing)",
        charts=[line_chart("GPU utilisation over time", series, "hour", "cards in use / cards")],
        tables=[
            {
                "title": "Summary",
                "header": ["mode", "utilisation", "p95 wait (s)", "preemptions"],
                "rows": summary,
            },
            {
                "title": "Per team",
                "header": [
                    "mode",
                    "team",
                    "jobs",
                    "started",
                    "finished",
                    "p50 wait (s)",
                    "p95 wait (s)",
                ],
                "rows": rows,
            },
        ],
        version=__version__,
    )


def scenario_csv(result: dict) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["mode", "hour", "cards_in_use"])
    for mode in MODES:
        for hour, used in result[mode]["cards_in_use"]:
            writer.writerow([mode, hour, used])
    return out.getvalue()


SUMMARY_COLUMNS = (
    "started",
    "never_started",
    "alloc_ratio_mean",
    "useful_util_mean",
    "alloc_ratio_while_queued",
    "useful_util_while_queued",
    "queue_delay_p50_s",
    "queue_delay_p95_s",
)


def openb_time_report_html(result: dict) -> str:
    runs = [(f"{p}/{m}", r) for p, modes in result["policies"].items() for m, r in modes.items()]
    alloc = [(name, [(h, a) for h, a, _, _ in r["series"]]) for name, r in runs]
    useful = [(name, [(h, u) for h, _, u, _ in r["series"]]) for name, r in runs]
    waiting = [(name, [(h, w) for h, _, _, w in r["series"]]) for name, r in runs]
    return _ENV.get_template("report.html.j2").render(
        title="openb trace replayed in time",
        subtitle=f"{result['nodes']} nodes, {result['gpus']} GPUs, {result['pods']} pods, "
        f"arrivals compressed {result['time_scale']}x — fractional shares vs whole cards",
        charts=[
            line_chart("GPU allocation ratio", alloc, "hour", "held / capacity"),
            line_chart("Useful GPU utilisation", useful, "hour", "asked-for / capacity"),
            line_chart("Pods waiting", waiting, "hour", "pods"),
        ],
        tables=[
            {
                "title": "Summary",
                "header": ["policy/mode", *SUMMARY_COLUMNS],
                "rows": [[name, *(r[c] for c in SUMMARY_COLUMNS)] for name, r in runs],
            }
        ],
        version=__version__,
    )


def openb_time_csv(result: dict) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["policy", "mode", "hour", "alloc_ratio", "useful_util", "waiting"])
    for policy, modes in result["policies"].items():
        for mode, r in modes.items():
            for point in r["series"]:
                writer.writerow([policy, mode, *point])
    return out.getvalue()
