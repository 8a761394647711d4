"""``gpupool bench figures``: the README's and docs' deterministic figures, recomputed and
judged against their baselines (``--check`` is the CI gate; docs/figures.md)."""

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.table import Column, Table

from gpupool.cli.errors import err_console, friendly
from gpupool.model import SpecError

if TYPE_CHECKING:  # the gate's imports wait for the command (numpy among them)
    from gpupool.bench.figures.gate import Report
    from gpupool.bench.figures.model import Figure


def figures_command(
    check: bool = typer.Option(
        False, "--check", help="Exit 1 when a figure is worse than its baseline (the CI gate)."
    ),
    update: bool = typer.Option(
        False, "--update", help="Rewrite the computed figures' baselines (needs --why)."
    ),
    why: str = typer.Option("", help="--update: why the baselines change (kept with each)."),
    only: str = typer.Option(
        "", help="Comma list of groups: openb-default, openb-family, defrag, scenario, roi, harvest"
    ),
    baselines: Path = typer.Option(
        None, help="Baselines file [default: src/gpupool/bench/figures/baselines.json]"
    ),
    workers: int = typer.Option(0, min=0, max=64, help="Processes [default: 2, or the cores]"),
    as_json: bool = typer.Option(False, "--json", help="Every figure with its verdict, as JSON."),
) -> None:
    """Recompute every deterministic figure the README and docs claim (the openb default
    list, the published trace family against the paper, defragmentation, the seed scenario,
    ROI, Harvest@99) and compare each with its baseline. Figures whose data (openb,
    ServeGen) is absent are reported as not computed; with GPUPOOL_REQUIRE_FIGURES=1 that
    fails too. Seconds are reported with the machine, never gated."""
    from gpupool.bench.figures import baselines as files
    from gpupool.bench.figures.gate import check as judge_all
    from gpupool.bench.figures.gate import compute, machine, select
    from gpupool.bench.figures.sources import find_sources, required
    from gpupool.bench.simulate import default_workers

    if update and not why.strip():
        raise SpecError("--update needs --why: say why the baselines change", field="why")
    path = baselines or files.FILE
    try:
        groups = select([g.strip() for g in only.split(",") if g.strip()] or None)
        known = files.load(path)
    except (ValueError, OSError) as exc:
        raise SpecError(str(exc)) from None
    workers = workers or default_workers()

    def progress(key: str) -> None:
        if not as_json:
            err_console.print(f"[dim]computed {key}[/dim]")

    figures, timing = compute(groups, find_sources(), workers, progress=progress)
    report = judge_all(figures, known, required())
    if update:
        commit = files.head_commit()
        new, changed = files.updated(known, figures, commit, why.strip())
        files.save(new, path)
        err_console.print(f"{len(changed)} baseline(s) set at {commit} in {path}")
        for name in changed:
            err_console.print(f"  {name}: {known[name].value if name in known else '-'} -> "
                              f"{new[name].value}")  # fmt: skip
        report = judge_all(figures, new, required())
    timing["machine"] = machine()
    if as_json:
        typer.echo(json.dumps(_as_json(figures, report, timing)))
    else:
        _table(report)
        for line in report.summary():
            Console().print(line, markup=False)
        m = timing["machine"]
        Console().print(
            f"[dim]{timing['wall_s']} s on {m['cpus']} cores ({m['processor']}, reference loop "
            f"{m['reference_loop_s']} s), {timing['workers']} workers; not gated[/dim]"
        )
    if check and not report.passed:
        raise typer.Exit(1)


def _as_json(figures: "list[Figure]", report: "Report", timing: dict[str, Any]) -> dict[str, Any]:
    rows = []
    for f, v in zip(figures, report.verdicts, strict=True):
        b = v.baseline
        rows.append({
            "name": f.name, "value": f.value, "status": v.status, "message": v.message,
            "baseline": b.value if b else None, "tolerance": b.tolerance if b else None,
            "direction": b.direction if b else f.direction, "limit": f.limit,
            "baseline_commit": b.commit if b else None, "baseline_why": b.why if b else None,
            "doc": f.doc,
        })  # fmt: skip
    return {
        "passed": report.passed,
        "required": report.required,
        "failures": [v.name for v in report.failures],
        "not_computed": [v.name for v in report.not_computed],
        "summary": report.summary(),
        "figures": rows,
        "timing": timing,
    }


def _table(report: "Report") -> None:
    table = Table(
        Column("figure", overflow="fold"), "value", "baseline", "tol", "verdict",
        title="gpupool figures",
    )  # fmt: skip
    for v in report.verdicts:
        b = v.baseline
        colour = "red" if v in report.failures else "green" if v.status in ("ok", "better") else ""
        table.add_row(
            v.name,
            "-" if v.value is None else f"{v.value:g}",
            "-" if b is None else f"{b.value:g}",
            "-" if b is None else f"{b.tolerance:g}",
            f"[{colour}]{v.status}[/{colour}]" if colour else v.status,
        )
    Console().print(table)


def register(app: typer.Typer) -> None:
    app.command("figures")(friendly(figures_command))
