"""A generic job trace for users' own history (e.g. exported from Slurm ``sacct``).

CSV with a header, or JSON Lines, with the fields ``submit_time``, ``duration``, ``tenant``,
``request`` and optionally ``kind`` and ``priority_class``. ``submit_time`` is seconds from the
start of the trace or an ISO 8601 timestamp (made relative to the earliest one); ``duration`` is
seconds or sacct's elapsed form ``[D-]HH:MM:SS``. ``request`` uses the request grammar
(``gpu=A100-80G:2,cpu=8``). Bad rows are reported with line numbers and skipped, or the whole
file is rejected with ``strict=True``.
"""

import csv
import json
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from gpupool.model import JobKind, ResourceRequest, SpecError, parse_request
from gpupool.sim.traces.rows import RowError, bad_rows_error

REQUIRED = ("submit_time", "duration", "tenant", "request")
_ELAPSED = re.compile(r"^(?:(\d+)-)?(\d{1,2}):(\d{2}):(\d{2})$")


@dataclass(frozen=True, slots=True)
class TraceJob:
    submit_s: float
    duration_s: float
    tenant: str
    request: ResourceRequest
    kind: JobKind
    priority_class: str | None


def _seconds(value: object, field: str) -> float | datetime:
    text = str(value).strip()
    if not text:
        raise ValueError(f"{field} is empty")
    match = _ELAPSED.match(text)
    if match:
        days, h, m, s = (int(x) if x else 0 for x in match.groups())
        return float(days * 86400 + h * 3600 + m * 60 + s)
    try:
        number = float(text)
    except ValueError:
        try:
            return datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(
                f"{field}={text!r} is not seconds, [D-]HH:MM:SS or an ISO 8601 time"
            ) from None
    if number < 0:
        raise ValueError(f"{field}={text} is negative")
    return number


def _rows(path: Path) -> list[tuple[int, dict]]:
    text = path.read_text()
    if path.suffix in (".jsonl", ".ndjson"):
        rows = []
        for line_no, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                rows.append((line_no, {"__error__": f"not JSON: {exc.msg}"}))
                continue
            rows.append((line_no, row if isinstance(row, dict) else {"__error__": "not an object"}))
        return rows
    reader = csv.DictReader(text.splitlines())
    missing = [c for c in REQUIRED if c not in (reader.fieldnames or [])]
    if missing:
        raise SpecError(f"{path.name}: missing column(s) {', '.join(missing)}", field="header")
    return [(reader.line_num, row) for row in reader]


def load_job_trace(
    path: str | Path, *, strict: bool = False
) -> tuple[list[TraceJob], list[RowError]]:
    file = Path(path)
    if not file.is_file():
        raise SpecError(f"trace: {file} is not a file")
    parsed: list[tuple[int, float | datetime, float, dict]] = []
    errors: list[RowError] = []
    for line, row in _rows(file):
        try:
            if "__error__" in row:
                raise ValueError(row["__error__"])
            for key in REQUIRED:
                if row.get(key) in (None, ""):
                    raise ValueError(f"{key} is missing")
            submit = _seconds(row["submit_time"], "submit_time")
            duration = _seconds(row["duration"], "duration")
            if isinstance(duration, datetime) or duration <= 0:
                raise ValueError(f"duration={row['duration']!r} must be a positive length")
            parsed.append((line, submit, duration, row))
        except (ValueError, SpecError) as exc:
            errors.append(RowError(line, str(exc)))
    stamps = [s for _, s, _, _ in parsed if isinstance(s, datetime)]
    if stamps and len(stamps) != len(parsed):
        raise SpecError(f"{file.name}: mixes timestamps and seconds in submit_time")
    origin = min(stamps) if stamps else None
    jobs: list[TraceJob] = []
    for line, submit, duration, row in parsed:
        try:
            request = parse_request(str(row["request"]))
            kind = JobKind(str(row.get("kind") or "batch").strip().lower())
        except (SpecError, ValueError) as exc:
            errors.append(RowError(line, str(exc)))
            continue
        if isinstance(submit, datetime):  # then every row has one (checked above)
            assert origin is not None
            start = (submit - origin).total_seconds()
        else:
            start = float(submit)
        jobs.append(
            TraceJob(
                start,
                float(duration),
                str(row["tenant"]).strip(),
                request,
                kind,
                (row.get("priority_class") or None),
            )
        )
    if strict and errors:
        raise bad_rows_error(file.name, errors)
    return sorted(jobs, key=lambda j: j.submit_s), sorted(errors, key=lambda e: e.line)
