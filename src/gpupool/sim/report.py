"""Self-contained HTML reports and CSV series for simulation results."""

import csv
import io
from pathlib import Path

from jinja2 import Environment, PackageLoader, select_autoescape

from gpupool import __version__
from gpupool.sim.charts import line_chart

_ENV = Environment(
    loader=PackageLoader("gpupool.sim", "templates"), autoescape=select_autoescape(["html"])
)


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
