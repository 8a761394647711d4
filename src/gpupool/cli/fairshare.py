"""``gpupool shares`` (Slurm's sshare) and ``gpupool priority`` (sprio): fair share over time
and pending jobs' priorities split into their parts, with Slurm's columns."""

import json
from typing import Any

import typer

from gpupool.cli.client import JSON_OPT, client_command
from gpupool.cli.slurm_jobs import PARTITION
from gpupool.client import ApiClient

PARSABLE_OPT = typer.Option(
    False, "--parsable2", "-P", help="Fields split by |, no trailing | (sshare/sprio -P)"
)
NOHEADER_OPT = typer.Option(False, "--noheader", "-n", help="No header lines")


def _lines(
    header: list[str], widths: list[int], rows: list[list[str]], parsable: bool, noheader: bool
) -> list[str]:
    """Slurm's fixed columns (left-aligned first, right-aligned numbers, a dashed rule under
    the header), or -P's ``a|b|c``."""
    if parsable:
        out = [] if noheader else ["|".join(header)]
        return out + ["|".join(r) for r in rows]

    def line(cells: list[str]) -> str:
        first = cells[0][: widths[0]].ljust(widths[0])
        rest = [c[:w].rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True)]
        return " ".join([first, *rest]).rstrip()

    out = [] if noheader else [line(header), " ".join("-" * w for w in widths)]
    return out + [line(r) for r in rows]


def _num(value: float | None, digits: int = 6) -> str:
    return "inf" if value is None else f"{value:.{digits}f}"


def share_lines(body: dict[str, Any], long: bool, parsable: bool, noheader: bool) -> list[str]:
    """sshare's columns: Account (indented by depth), RawShares, NormShares, RawUsage (decayed
    borrowed card-hours), EffectvUsage, FairShare; -l adds LevelFS and gpupool's Borrowing
    (cards now) and Used (all decayed card-hours)."""
    depth: dict[str, int] = {}
    header = ["Account", "RawShares", "NormShares", "RawUsage", "EffectvUsage", "FairShare"]
    widths = [20, 10, 11, 11, 13, 10]
    if long:
        header += ["LevelFS", "Borrowing", "Used"]
        widths += [10, 10, 11]
    rows = []
    for r in body["items"]:
        depth[r["tenant"]] = depth.get(r["parent"], -1) + 1 if r["parent"] else 0
        account = r["tenant"] if parsable else " " * depth[r["tenant"]] + r["tenant"]
        effective = "" if r["norm_usage"] is None else _num(r["norm_usage"])
        cells = [account, f"{r['raw_shares']:g}", _num(r["norm_shares"]),
                 f"{r['raw_usage']:.2f}", effective, _num(r["fairshare"])]  # fmt: skip
        if long:
            seen = r["norm_usage"] is not None
            cells += [_num(r["level_fs"]) if seen else "", f"{r['borrowing']:g}",
                      f"{r['used']:.2f}"]  # fmt: skip
        rows.append(cells)
    return _lines(header, widths, rows, parsable, noheader)


@client_command
def shares(
    long: bool = typer.Option(False, "--long", "-l", help="Add LevelFS, Borrowing and Used"),
    parsable: bool = PARSABLE_OPT,
    noheader: bool = NOHEADER_OPT,
    as_json: bool = JSON_OPT,
) -> None:
    """Fair share over time as sshare shows it: each tenant you see, depth first in the
    Fair Tree's order, with its weight, decayed borrowed card-hours and fair-share factor
    (docs/fair-share-and-estimates.md). EffectvUsage and LevelFS compare a tenant with its
    siblings: blank where you do not see them all."""
    with ApiClient.from_env() as api:
        body = api.get("/api/v1/fairshare")
    if as_json:
        typer.echo(json.dumps(body, indent=2))
        return
    if not body["active"] and not parsable:
        half_life = f"{body['half_life_h']:g} h"
        typer.echo(
            "fair share over time is off on this server (the cycle borrows by static "
            f"weights); shown with a {half_life} half-life",
            err=True,
        )
    for line in share_lines(body, long, parsable, noheader):
        typer.echo(line)


def priority_lines(body: dict[str, Any], parsable: bool, noheader: bool) -> list[str]:
    """sprio's columns: JOBID PARTITION ACCOUNT USER PRIORITY AGE FAIRSHARE QOS NICE (QOS:
    the priority class's value; NICE: minus the job's own priority)."""
    header = ["JOBID", "PARTITION", "ACCOUNT", "USER", "PRIORITY", "AGE", "FAIRSHARE", "QOS",
              "NICE"]  # fmt: skip
    widths = [10, 10, 10, 8, 10, 10, 10, 10, 6]
    rows = [
        [str(p["job_id"]), PARTITION, p["tenant"], p["user"], f"{p['priority']:.0f}",
         f"{p['age']:.0f}", f"{p['fairshare']:.0f}", str(p["qos"]), str(p["nice"])]
        for p in body["items"]
    ]  # fmt: skip
    if parsable:
        return _lines(header, widths, rows, True, noheader)
    widths[0] = max([widths[0], *(len(r[0]) for r in rows)])
    right = [[r[0].rjust(widths[0]), *r[1:]] for r in [header, *rows]]  # ids as sprio: right
    return _lines(right[0], widths, right[1:], False, noheader)


@client_command
def priority(
    tenant: str = typer.Option(None, "--tenant", "-A", help="Only this tenant (sprio -A)"),
    user: str = typer.Option(None, "--user", "-u", help="Only jobs this user submitted"),
    parsable: bool = PARSABLE_OPT,
    noheader: bool = NOHEADER_OPT,
    limit: int = typer.Option(1000, help="At most this many jobs"),
    as_json: bool = JSON_OPT,
) -> None:
    """Pending jobs' priorities as sprio splits them, highest first: the class's value
    (QOS), the job's own priority (NICE, negated as Slurm's), aging (AGE) and fair share
    (FAIRSHARE: fairshare_weight times its tenant's factor; 0 while fair share is off)."""
    with ApiClient.from_env() as api:
        body = api.get("/api/v1/priority", tenant=tenant, user=user, limit=limit)
    if as_json:
        typer.echo(json.dumps(body, indent=2))
        return
    for line in priority_lines(body, parsable, noheader):
        typer.echo(line)
