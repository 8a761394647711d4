"""Jobs as scancel names them: ``24`` is job 24 — every task of array 24 when 24 is an array's
id (its first task's) — and ``24_3`` the task of index 3 of array 24 alone. The server cancels
a whole array in one transaction (``POST /jobs/{id}/cancel``), one task of it with ``task``."""

import re
from typing import Any

from gpupool.client import ApiClient
from gpupool.client.paging import all_items
from gpupool.model import SpecError

Ref = tuple[int, int | None]  # a job or array id, and a task index (ARRAY_TASK) or None
_REF = re.compile(r"([0-9]{1,18})(?:_([0-9]{1,9}))?")


def task_ref(text: str, option: str = "job") -> Ref:
    """``24`` or ``24_3``; anything else is refused naming it (and ``option``)."""
    found = _REF.fullmatch(text.strip())
    if found is None:
        raise SpecError(
            f"{option}: {text!r} is neither a job id (24) nor an array task (24_3)",
            field=option.lstrip("-"),
        )
    job, task = found.groups()
    return int(job), None if task is None else int(task)


_RANGE = re.compile(r"([0-9]{1,18})_\[([0-9,\-]{1,200})\]")


def task_refs(text: str, option: str = "job") -> list[Ref]:
    """``24``, ``24_3`` or, as scancel and squeue write several tasks, ``24_[1-3,7]``."""
    found = _RANGE.fullmatch(text.strip())
    if found is None:
        return [task_ref(text, option)]
    job, spec = int(found.group(1)), found.group(2)
    indexes: list[int] = []
    for part in spec.split(","):
        lo, dash, hi = part.partition("-")
        if not lo.isdigit() or (dash and not hi.isdigit()) or (dash and int(hi) < int(lo)):
            raise SpecError(
                f"{option}: {text!r}: {part!r} is neither a task index (3) nor a range (1-3)",
                field=option.lstrip("-"),
            )
        indexes += range(int(lo), int(hi if dash else lo) + 1)
        if len(indexes) > 10_000:
            raise SpecError(
                f"{option}: {text!r} names more than 10,000 tasks", field=option.lstrip("-")
            )
    return [(job, i) for i in dict.fromkeys(indexes)]


def is_head(job: dict[str, Any]) -> bool:
    """Whether ``job`` is an array's first task, whose id names the array."""
    return job.get("array_job") is not None and job["array_job"] == job["id"]


def is_array(api: ApiClient, job_id: int) -> bool:
    return is_head(api.get(f"/api/v1/jobs/{job_id}"))


def _tasks(api: ApiClient, array: int) -> list[dict[str, Any]]:
    return all_items(api, "/api/v1/jobs", array=array)


def _task(api: ApiClient, array: int, index: int) -> dict[str, Any]:
    for job in _tasks(api, array):
        if job["array_index"] == index:
            return job
    raise SpecError(f"job: {array}_{index}: array {array} has no task {index}", field="job")


def named(api: ApiClient, ref: Ref) -> Ref:
    """What to cancel for ``ref``: (id, None) — a job, or a whole array — or, for an array's
    first task alone, (array id, its index). A task is looked up first, so a server that does
    not know ``task`` still cancels that task and no other."""
    job_id, index = ref
    if index is None:
        return ref
    task = _task(api, job_id, index)
    return (job_id, index) if is_head(task) else (task["id"], None)


def matching(
    api: ApiClient, refs: list[Ref], filters: dict[str, Any], states: tuple[str, ...]
) -> list[dict[str, Any]]:
    """The jobs in ``states`` (or the filters' state) matching every filter; with ``refs``,
    only those they name (an array's id names each of its tasks)."""
    state = filters.pop("state", None)
    found: dict[int, dict[str, Any]] = {}
    for s in (state,) if state else states:
        found |= {j["id"]: j for j in all_items(api, "/api/v1/jobs", state=s, **filters)}
    if not refs:
        return [found[i] for i in sorted(found)]
    ids: list[int] = []
    for job_id, index in refs:
        if index is not None:
            ids.append(_task(api, job_id, index)["id"])
        elif is_array(api, job_id):
            ids += [t["id"] for t in _tasks(api, job_id)]
        else:
            ids.append(job_id)
    return [found[i] for i in dict.fromkeys(ids) if i in found]


def cancel(api: ApiClient, job_id: int, task: int | None) -> tuple[dict[str, Any], bool]:
    """Cancel job ``job_id`` (a whole array on its id) or, with ``task``, that task of the
    array alone: the server's answer, and whether it was asked for a whole array."""
    params = {"task": task} if task is not None else None
    answer = api.call("POST", f"/api/v1/jobs/{job_id}/cancel", params=params)
    return answer, task is None and is_head(answer)


def cancelled_line(answer: dict[str, Any], whole: bool) -> str:
    """What a cancel did, in a line: ``array 24: 5 tasks cancelled``, ``job 27 (array 24
    task 3) cancelled``, ``job 5 cancelled``."""
    if whole:
        done = answer.get("cancelled") or [answer["id"]]  # an older server: the job alone
        return f"array {answer['id']}: {len(done)} task{'s' if len(done) != 1 else ''} cancelled"
    if answer.get("array_job") is not None:
        where = f"array {answer['array_job']} task {answer['array_index']}"
        return f"job {answer['id']} ({where}) {answer['state']}"
    return f"job {answer['id']} {answer['state']}"
