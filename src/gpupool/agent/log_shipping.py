"""Shipping one workload's output to the server: what it printed since the last round (at most
``ROUND_BYTES`` a stream a round; all of it once the workload has ended), up to the job's log
limit. Past the limit — the agent's, or the server's word that the tenant's logs are full —
the output files are emptied each round, so they cannot fill the node's disk, and the log
says once that the rest was not kept."""

import os
from pathlib import Path

from gpupool.agent.api import AgentApi, AgentApiError
from gpupool.agent.log_upload import TRUNCATED, read_pieces
from gpupool.agent.state import Record, Store

ROUND_BYTES = 1024 * 1024  # a stream's upload in one round while the workload runs
REFUSED = (413, 429)  # the server keeps no more of this tenant's or job's logs


def ship(api: AgentApi, store: Store, rec: Record, limit: int, ended: bool) -> bool:
    """Upload ``rec``'s new output; whether its offsets changed (the record is to be saved)."""
    folder = store.dir(rec.alloc_id)
    changed = False
    for stream in ("stdout", "stderr"):
        path = folder / stream
        if rec.log_bytes >= limit:
            changed |= _drop(api, rec, path, stream, limit)
            continue
        budget = limit - rec.log_bytes
        budget = budget if ended else min(budget, ROUND_BYTES)
        try:
            pieces = read_pieces(path, rec.offsets[stream], budget, ended)
        except OSError:
            continue
        for piece in pieces:
            try:
                api.logs(rec.alloc_id, stream, piece.text)
            except AgentApiError as exc:
                if exc.status not in REFUSED:
                    raise
                rec.log_bytes, rec.log_truncated = limit, True  # the server said so already
                changed |= _drop(api, rec, path, stream, limit)
                break
            rec.offsets[stream] += piece.consumed
            rec.log_bytes += piece.consumed
            changed = True
    return changed


def _drop(api: AgentApi, rec: Record, path: Path, stream: str, limit: int) -> bool:
    """Past the log limit: the stream that goes on printing says so once, then its file is
    emptied each round (the workload appends, so it writes at the new end)."""
    try:
        if path.stat().st_size <= rec.offsets[stream]:
            return False  # nothing new
        if not rec.log_truncated:
            _say_truncated(api, rec, stream, limit)
        os.truncate(path, 0)
    except OSError:
        return False
    rec.offsets[stream] = 0
    return True


def _say_truncated(api: AgentApi, rec: Record, stream: str, limit: int) -> None:
    """The log's last line says the rest was not kept. A server that refuses more of this
    tenant's logs will not take it either; a server that is away hears it next round."""
    try:
        api.logs(rec.alloc_id, stream, TRUNCATED.format(limit=limit))
    except AgentApiError as exc:
        if exc.status not in REFUSED:
            raise
    rec.log_truncated = True
