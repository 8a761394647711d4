"""``gpupool sessions``: the running interactive sessions one may see, with their idle time
as idle culling counts it (docs/interactive.md, "Idle culling")."""

import time
from typing import Any

import typer

from gpupool.cli.client import JSON_OPT, client_command
from gpupool.cli.output import emit, zoned
from gpupool.cli.views import duration
from gpupool.client import ApiClient

COLUMNS = ["job_id", "tenant", "name", "interactive", "class", "nodes", "idle", "timeout",
           "release"]  # fmt: skip


def _cell(row: dict[str, Any], column: str) -> str:
    if column == "class":
        return str(row["priority_class"])
    if column == "nodes":
        return ",".join(row["nodes"]) or "-"
    if column == "idle":
        return duration(row["idle_s"]) if row["started_at"] is not None else "-"
    if column == "timeout":
        return duration(row["idle_timeout_s"]) if row["idle_timeout_s"] else "off"
    if column == "release":
        at = row["release_at"]
        return "-" if at is None else f"{zoned(at)} (in {duration(at - time.time())})"
    return str(row.get(column, ""))


@client_command
def sessions(
    tenant: str = typer.Option(None, help="Only this tenant's"),
    as_json: bool = JSON_OPT,
) -> None:
    """Running interactive sessions (gpupool alloc, srun) with how long each has been idle
    (no terminal input, no GPU activity), its idle timeout, and the release an idle warning
    announced (it goes once someone types there or its cards work)."""
    with ApiClient.from_env() as api:
        rows = api.get("/api/v1/sessions", tenant=tenant)
    emit(rows, COLUMNS, as_json=as_json, cell=_cell, empty="no running sessions",
         caption="idle: since the last terminal input or GPU activity (-: not started); "
         "timeout: off = never released for idleness")  # fmt: skip
