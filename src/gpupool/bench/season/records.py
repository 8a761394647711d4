"""What the checker reads: the workloads' own record files, the season's log of what it
submitted and what the server acknowledged, and the server's usage records — as plain values."""

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Record:
    """One workload process, as it wrote itself down. ``completed``: it ran its whole time
    (True), was stopped (False), or left no end line (None: killed, or still running)."""

    key: str
    job: int
    allocation: int
    pid: int
    node: str
    tenant: str
    gpus: str
    start: float
    last: float  # its end line, or its last tick
    completed: bool | None


@dataclass(frozen=True)
class Submission:
    """One planned job as the server acknowledged it: ``job`` the id of the first answer,
    ``repeats`` the ids of the same message sent again (the same idempotency key)."""

    key: str
    team: str
    cards: int
    run_s: float
    acked_at: float
    job: int
    repeats: tuple[int, ...] = ()


@dataclass(frozen=True)
class Metered:
    """One usage record of the server (``/api/v1/usage``)."""

    tenant: str
    job: int
    allocation: int
    start: float
    end: float
    devices: int


def read_records(folder: Path) -> list[Record]:
    out = []
    for path in sorted(folder.glob("*.rec")):
        head: dict[str, Any] | None = None
        last, completed = 0.0, None
        for text in path.read_text(errors="replace").splitlines():
            try:
                line = json.loads(text)
            except ValueError:  # a line cut by a kill is not a line
                continue
            if "start" in line:
                head, last = line, line["start"]
            elif "tick" in line:
                last = max(last, line["tick"])
            elif "end" in line:
                last, completed = max(last, line["end"]), bool(line["completed"])
        if head is None:
            continue
        pid = int(path.name.split(".")[-2])
        out.append(
            Record(
                head["key"],
                head["job"],
                head["allocation"],
                pid,
                head["node"],
                head["tenant"],
                head["gpus"],
                head["start"],
                last,
                completed,
            )
        )
    return out


def metered(items: list[dict[str, Any]]) -> list[Metered]:
    return [
        Metered(i["tenant"], i["job_id"], i["allocation_id"], i["start"], i["end"], i["devices"])
        for i in items
    ]
