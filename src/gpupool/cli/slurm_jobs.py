"""A gpupool job (the API's ``JobOut``) as Slurm's commands print one: ``squeue``'s fields
(``-o`` letters, ``-O`` names), ``sacct``'s fields, and ``scontrol show job``'s key=value
lines, with Slurm's words — states (PENDING, RUNNING, COMPLETED...; PD, R, CD...), reasons
(Resources, Priority, Dependency, JobHeldUser...), times (squeue's M:SS, sacct's HH:MM:SS,
ISO 8601 in the user's zone), job ids (``ARRAY_TASK``), node lists (``n[1-2]``). What has no
meaning here is printed as Slurm prints an empty value; docs/slurm.md has the list. Pure."""

import time
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from gpupool.cli.slurm_format import AcctField, Column
from gpupool.model import ResourceRequest, parse_request
from gpupool.model.hostlist import compress
from gpupool.scheduler.gates import dependency_status
from gpupool.scheduler.reasons import Wait

PARTITION = "gpupool"  # one pool, no partitions: every job's
LONG_STATE = {"pending": "PENDING", "admitted": "CONFIGURING", "running": "RUNNING",
              "succeeded": "COMPLETED", "failed": "FAILED", "cancelled": "CANCELLED"}  # fmt: skip
SHORT_STATE = {"PENDING": "PD", "CONFIGURING": "CF", "RUNNING": "R", "COMPLETED": "CD",
               "FAILED": "F", "CANCELLED": "CA"}  # fmt: skip
WAIT_REASON = {"no-room": "Resources", "quota": "AssocGrpGRES", "behind": "Priority",
               "preempting": "Resources", "limited": "Resources",
               "invalid": "BadConstraints", "never": "ReqNodeNotAvail",
               "approval": "Resources", "waking": "Resources"}  # fmt: skip  # fmt: skip
SQUEUE_STATES = {"PD": "pending", "PENDING": "pending", "R": "running", "RUNNING": "running",
                 "CF": "admitted", "CONFIGURING": "admitted", "CD": "succeeded",
                 "COMPLETED": "succeeded", "F": "failed", "FAILED": "failed",
                 "CA": "cancelled", "CANCELLED": "cancelled"}  # fmt: skip


def state(j: dict[str, Any], sacct: bool = False) -> str:
    """Slurm's state word; sacct says RUNNING where squeue says CONFIGURING (admitted)."""
    word = LONG_STATE[j["state"]]
    return "RUNNING" if sacct and word == "CONFIGURING" else word


States = Mapping[int, Sequence[str]]  # a dependency's job -> its (tasks') states


def reason(j: dict[str, Any], states: States | None = None, now: float | None = None) -> str:
    """squeue's ``%r``: Slurm's reason word for a pending job, None for the others. Decided
    by the job's typed fields as the server's gates decide (held, begin time, dependencies
    with ``states`` of the jobs they name, singleton, array limit) and the cycle's wait code,
    never by reading its reason's words."""
    if j["state"] != "pending":
        return "None"
    if j.get("held"):
        return "JobHeldUser"
    at = time.time() if now is None else now
    if j.get("begin_at") is not None and at < j["begin_at"]:
        return "BeginTime"
    code = j.get("wait_code") or ""
    if code != Wait.GATED:
        return WAIT_REASON.get(code, "None")
    deps = [(d["type"], d["job"]) for d in j.get("dependency") or [] if d["type"] != "singleton"]
    if deps:
        met, never = dependency_status(deps, states or {})
        if never:
            return "DependencyNeverSatisfied"
        if not met or states is None:
            return "Dependency"
    if any(d["type"] == "singleton" for d in j.get("dependency") or []):
        return "Dependency"
    return "JobArrayTaskLimit" if j.get("array_limit") is not None else "Dependency"


def job_id(j: dict[str, Any]) -> str:
    """``12`` or, for an array's task, ``ARRAY_INDEX`` (``12_3``)."""
    if j.get("array_job") is not None:
        return f"{j['array_job']}_{j['array_index']}"
    return str(j["id"])


def nodes(j: dict[str, Any]) -> list[str]:
    return list(dict.fromkeys(n["node"] for n in (j.get("allocation") or {}).get("nodes", [])))


def _asked(j: dict[str, Any]) -> ResourceRequest:
    """One worker's request, typed (the server's canonical text)."""
    return parse_request(j["request"])


def _granted(j: dict[str, Any]) -> list[dict[str, Any]]:
    return list((j.get("allocation") or {}).get("nodes", []))


def cpus(j: dict[str, Any]) -> int:
    """CPUs held (a placed job: every worker's, whole ones) or asked (workers × request)."""
    granted = _granted(j)
    if granted:
        return sum(-(-n["cpu_millis"] // 1000) for n in granted)
    return -(-_asked(j).cpu_millis * j["gang_size"] // 1000)


def gpus_per_node(j: dict[str, Any]) -> int:
    """Cards held on its (first) node, or asked a worker."""
    granted = _granted(j)
    if granted:
        return len(granted[0]["devices"])
    return _asked(j).gpu


def mem_per_node(j: dict[str, Any]) -> int | None:
    """MiB held on its (first) node, or asked a worker; None: all of a node's, not placed."""
    granted = _granted(j)
    if granted:
        return int(granted[0]["mem_mib"])
    asked = _asked(j)
    return None if asked.mem_all else asked.mem_mib


def _used(j: dict[str, Any], now: float) -> float:
    start = j.get("started_at")
    if start is None:
        return 0.0
    return max(0.0, (j.get("finished_at") or now) - start)


def mem_unit(mib: int) -> str:
    """Slurm's ``convert_num_unit`` from MiB: 64G, 1000M, 1.50G; 0 is "0"."""
    if mib == 0:
        return "0"
    num, unit = float(mib), 0
    while num >= 1024 and unit < 3:
        num, unit = num / 1024, unit + 1
    text = f"{int(num)}" if num == int(num) else f"{num:.2f}"
    return text + "MGTP"[unit]


def never(row: Any) -> bool:
    return False


def _or(value: Any, empty: str | None) -> str | None:
    """``value`` as text, ``empty`` for None (an index 0 is an index)."""
    return empty if value is None else str(value)


def squeue_time(seconds: float | None) -> str:
    """squeue's ``_print_secs``: M:SS, H:MM:SS or D-HH:MM:SS; None: UNLIMITED."""
    if seconds is None:
        return "UNLIMITED"
    s = int(seconds)
    days, hours, minutes, secs = s // 86400, s // 3600 % 24, s // 60 % 60, s % 60
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}"
    if hours:
        return f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{minutes}:{secs:02d}"


def acct_time(seconds: float | None) -> str:
    """sacct's ``secs2time_str``: HH:MM:SS or D-HH:MM:SS; None: UNLIMITED."""
    if seconds is None:
        return "UNLIMITED"
    s = int(seconds)
    days, hours, minutes, secs = s // 86400, s // 3600 % 24, s // 60 % 60, s % 60
    clock = f"{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{days}-{clock}" if days else clock


def start_time(j: dict[str, Any]) -> float | None:
    """When it started, or — pending — when the leader's last plan expects it to start."""
    if j.get("started_at") is not None:
        return float(j["started_at"])
    estimate = j.get("estimate") or {}
    return estimate.get("start")


def sched_nodes(j: dict[str, Any]) -> str:
    """squeue's SCHEDNODES: the nodes a pending job is expected to start on."""
    planned = (j.get("estimate") or {}).get("nodes") or []
    return compress(planned) if planned else "(null)"


def stamp(t: float | None, empty: str = "N/A") -> str:
    """Slurm's time stamps: ISO 8601 to the second, in the user's zone (TZ)."""
    if t is None:
        return empty
    return datetime.fromtimestamp(t).strftime("%Y-%m-%dT%H:%M:%S")


def exit_code(j: dict[str, Any]) -> str:
    """``code:signal`` (a job killed by signal 9: ``0:9``)."""
    code = j.get("exit_code")
    if code is None:
        return "0:0"
    return f"0:{-code}" if code < 0 else f"{code}:0"


def work_dir(j: dict[str, Any]) -> str:
    return j.get("chdir") or j.get("submit_dir") or ""


def dependency(j: dict[str, Any]) -> str:
    deps = [d["type"] if d["type"] == "singleton" else f"{d['type']}:{d['job']}"
            for d in j.get("dependency") or []]  # fmt: skip
    return ",".join(deps) or "(null)"


def tres(j: dict[str, Any], granted: bool) -> str | None:
    """sacct's AllocTRES / ReqTRES: ``cpu=N,mem=M,node=N,gres/gpu=G`` (no billing=)."""
    if granted and not j.get("allocation") and j.get("started_at") is None:
        return None
    parts = [f"cpu={cpus(j)}"]
    mem = mem_per_node(j)
    if mem is not None:
        parts.append(f"mem={mem_unit(mem * j['gang_size'])}")
    parts.append(f"node={j['gang_size']}")
    gpus = gpus_per_node(j) * j["gang_size"]
    if gpus:
        parts.append(f"gres/gpu={gpus}")
    return ",".join(parts)


def squeue_columns(now: float | None = None, states: States | None = None) -> dict[str, Column]:
    """squeue's fields by ``-o`` letter; ``states``: of the jobs dependencies name."""
    at = time.time() if now is None else now

    def why(j: dict[str, Any]) -> str:
        return reason(j, states, at)

    def left(j: dict[str, Any]) -> str:
        cap, used = j.get("max_runtime_s"), _used(j, at)
        return squeue_time(None if cap is None else max(0.0, cap - used))

    def end(j: dict[str, Any]) -> str:
        if j.get("finished_at"):
            return stamp(j["finished_at"])
        start, cap = j.get("started_at"), j.get("max_runtime_s")
        return stamp(start + cap) if start and cap else "N/A"

    def reason_list(j: dict[str, Any]) -> str:
        if j["state"] == "pending":
            return f"({why(j)})"
        return compress(nodes(j))

    return {
        "i": Column("JOBID", job_id),
        "A": Column("JOBID", lambda j: str(j["id"])),
        "F": Column("ARRAY_JOB_ID", lambda j: str(j.get("array_job") or j["id"])),
        "K": Column("ARRAY_TASK_ID", lambda j: _or(j.get("array_index"), "N/A") or ""),
        "j": Column("NAME", lambda j: j["name"]),
        "u": Column("USER", lambda j: j["submitted_by"]),
        "a": Column("ACCOUNT", lambda j: j["tenant"]),
        "P": Column("PARTITION", lambda j: PARTITION),
        "q": Column("QOS", lambda j: j["priority_class"]),
        "T": Column("STATE", state),
        "t": Column("ST", lambda j: SHORT_STATE[state(j)]),
        "M": Column("TIME", lambda j: squeue_time(_used(j, at))),
        "l": Column("TIME_LIMIT", lambda j: squeue_time(j.get("max_runtime_s"))),
        "L": Column("TIME_LEFT", left),
        "D": Column("NODES", lambda j: str(j["gang_size"])),
        "C": Column("CPUS", lambda j: str(cpus(j))),
        "c": Column("MIN_CPUS", lambda j: str(-(-cpus(j) // j["gang_size"]))),
        "m": Column("MIN_MEMORY", lambda j: mem_unit(mem_per_node(j) or 0)),
        "b": Column(
            "TRES_PER_NODE", lambda j: f"gres/gpu:{g}" if (g := gpus_per_node(j)) else "N/A"
        ),
        "R": Column("NODELIST(REASON)", reason_list, cut=lambda j: j["state"] == "pending"),
        "N": Column("NODELIST", lambda j: compress(nodes(j)), cut=never),
        "r": Column("REASON", why),
        "n": Column("REQ_NODES", lambda j: compress(j.get("nodelist") or []), cut=never),
        "x": Column("EXC_NODES", lambda j: compress(j.get("exclude") or []), cut=never),
        "E": Column("DEPENDENCY", dependency),
        "S": Column("START_TIME", lambda j: stamp(start_time(j))),
        "Y": Column("SCHEDNODES", sched_nodes, cut=never),
        "V": Column("SUBMIT_TIME", lambda j: stamp(j.get("submit_time"))),
        "e": Column("END_TIME", end),
        "Z": Column("WORK_DIR", work_dir),
        "Q": Column("PRIORITY", lambda j: str(j.get("priority", 0))),
    }


# squeue -O's names (lower case) -> the letter of the same field
SQUEUE_NAMES = {
    "jobarrayid": "i", "jobid": "A", "arrayjobid": "F", "arraytaskid": "K", "name": "j",
    "username": "u", "account": "a", "partition": "P", "qos": "q", "state": "T",
    "statecompact": "t", "timeused": "M", "timelimit": "l", "timeleft": "L", "numnodes": "D",
    "numcpus": "C", "mincpus": "c", "minmemory": "m", "tres-per-node": "b", "gres": "b",
    "reasonlist": "R", "nodelist": "N", "reason": "r", "reqnodes": "n", "excnodes": "x",
    "dependency": "E", "starttime": "S", "submittime": "V", "endtime": "e", "workdir": "Z",
    "prioritylong": "Q", "schednodes": "Y",
}  # fmt: skip
SQUEUE_DEFAULT = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R"
SQUEUE_LONG = "%.18i %.9P %.8j %.8u %.8T %.10M %.9l %.6D %R"
SQUEUE_START = "%.18i %.9P %.8j %.8u %.2t %.19S %.6D %20Y %R"  # squeue --start


def sacct_fields(now: float | None = None, states: States | None = None) -> list[AcctField]:
    """sacct's fields gpupool prints, in Slurm's (alphabetical) order, with Slurm's widths."""
    at = time.time() if now is None else now

    def elapsed(j: dict[str, Any]) -> float:
        return _used(j, at)

    def ran(j: dict[str, Any]) -> bool:
        return j.get("started_at") is not None

    return [
        AcctField("Account", 10, lambda j: j["tenant"]),
        AcctField("AllocCPUS", 10, lambda j: str(cpus(j) if ran(j) else 0)),
        AcctField("AllocNodes", 10, lambda j: str(j["gang_size"] if ran(j) else 0)),
        AcctField("AllocTRES", 10, lambda j: tres(j, True)),
        AcctField("ArrayJobID", 12, lambda j: str(j.get("array_job") or j["id"])),
        AcctField("ArrayTaskID", 12, lambda j: _or(j.get("array_index"), None)),
        AcctField("CPUTime", 10, lambda j: acct_time(elapsed(j) * (cpus(j) if ran(j) else 0))),
        AcctField("CPUTimeRAW", 10, lambda j: str(int(elapsed(j) * (cpus(j) if ran(j) else 0)))),
        AcctField("Elapsed", 10, lambda j: acct_time(elapsed(j))),
        AcctField("ElapsedRaw", 10, lambda j: str(int(elapsed(j)))),
        AcctField("End", 19, lambda j: stamp(j.get("finished_at"), "Unknown")),
        AcctField("ExitCode", 8, exit_code),
        AcctField("JobID", -12, job_id),
        AcctField("JobIDRaw", -12, lambda j: str(j["id"])),
        AcctField("JobName", 10, lambda j: j["name"]),
        AcctField("MaxRSS", 10, lambda j: None),  # no steps: as Slurm's allocation line
        AcctField("MaxVMSize", 10, lambda j: None),
        AcctField("NCPUS", 10, lambda j: str(cpus(j) if ran(j) else 0)),
        AcctField("NNodes", 8, lambda j: str(j["gang_size"])),
        AcctField("NTasks", 8, lambda j: None),  # a step's, empty on the allocation line
        AcctField("NodeList", 15, lambda j: compress(nodes(j)) or "None assigned"),
        AcctField("Partition", 10, lambda j: PARTITION),
        AcctField("Priority", 10, lambda j: str(j.get("priority", 0))),
        AcctField("QOS", 10, lambda j: j["priority_class"]),
        AcctField("Reason", 22, lambda j: reason(j, states, at)),
        AcctField("ReqCPUS", 8, lambda j: str(cpus(j))),
        AcctField("ReqMem", 10, lambda j: mem_unit(mem_per_node(j) or 0)),
        AcctField("ReqNodes", 8, lambda j: str(j["gang_size"])),
        AcctField("ReqTRES", 10, lambda j: tres(j, False)),
        AcctField("Start", 19, lambda j: stamp(j.get("started_at"), "Unknown")),
        AcctField("State", 10, lambda j: state(j, sacct=True)),
        AcctField("Submit", 19, lambda j: stamp(j.get("submit_time"), "Unknown")),
        AcctField("Timelimit", 10, lambda j: acct_time(j.get("max_runtime_s"))),
        AcctField(
            "TimelimitRaw",
            10,
            lambda j: str(-(-j["max_runtime_s"] // 60)) if j.get("max_runtime_s") else "UNLIMITED",
        ),
        AcctField("TotalCPU", 10, lambda j: None),  # no steps' CPU accounting here
        AcctField("User", 9, lambda j: j["submitted_by"]),
        AcctField("WorkDir", 20, work_dir),
    ]


SACCT_DEFAULT = "jobid,jobname,partition,account,alloccpus,state,exitcode"
SACCT_BRIEF = "jobid,state,exitcode"


def show_job(
    j: dict[str, Any], now: float | None = None, states: States | None = None
) -> list[list[str]]:
    """``scontrol show job``'s lines of key=value pairs, in Slurm's order (the keys gpupool
    has a value for)."""
    at = time.time() if now is None else now
    first = [f"JobId={j['id']}", f"JobName={j['name']}"]
    if j.get("array_job") is not None:
        first[1:1] = [f"ArrayJobId={j['array_job']}", f"ArrayTaskId={j['array_index']}"]
    whole = any(n.get("whole") for n in (j.get("allocation") or {}).get("nodes", []))
    whole = whole or "node=whole" in j["request"]
    out = j.get("output") or ("slurm-%A_%a.out" if j.get("array_job") else "slurm-%j.out")
    begin = j.get("begin_at") or j.get("submit_time")
    return [
        first,
        [f"UserId={j['submitted_by']}", f"Account={j['tenant']}"],
        [f"Priority={j.get('priority', 0)}", f"QOS={j['priority_class']}"],
        [f"JobState={state(j)}", f"Reason={reason(j, states, at)}", f"Dependency={dependency(j)}"],
        [
            f"Requeue={1 if j.get('on_lost', 'requeue') == 'requeue' else 0}",
            "BatchFlag=1",
            f"ExitCode={exit_code(j)}",
        ],
        [f"RunTime={acct_time(_used(j, at))}", f"TimeLimit={acct_time(j.get('max_runtime_s'))}"],
        [f"SubmitTime={stamp(j.get('submit_time'))}", f"EligibleTime={stamp(begin)}"],
        [
            f"StartTime={stamp(start_time(j), 'Unknown')}",
            f"EndTime={stamp(j.get('finished_at'), 'Unknown')}",
        ],
        [f"Partition={PARTITION}"],
        [
            f"ReqNodeList={compress(j.get('nodelist') or []) or '(null)'}",
            f"ExcNodeList={compress(j.get('exclude') or []) or '(null)'}",
        ],
        [f"NodeList={compress(nodes(j)) or '(null)'}"],
        [f"NumNodes={j['gang_size']}", f"NumCPUs={cpus(j)}"],
        [f"TRES={tres(j, j.get('started_at') is not None) or tres(j, False)}"],
        [f"OverSubscribe={'NO' if whole else 'OK'}"],
        [f"WorkDir={work_dir(j) or '(null)'}"],
        [f"StdErr={j.get('error') or out}", f"StdOut={out}"],
    ]
