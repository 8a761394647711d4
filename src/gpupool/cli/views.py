"""What the cluster and queue views show, computed from API answers (pure, so the rules are
tested without a server): a node's state as Slurm's sinfo names it, its cards in use and
free, and squeue-style lines that fit 80 columns."""

import time
from collections import Counter
from typing import Any


def node_state(node: dict[str, Any], used: int, cpu_used: int) -> str:
    """sinfo's words: lost / fenced (agent trouble), drained (takes no new work), else idle,
    mixed or allocated by what is held (CPU for a node without cards)."""
    if node["state"] in ("lost", "fenced"):
        return node["state"]
    if not node["schedulable"]:
        return "drained"
    total = len(node["devices"])
    if total:
        return "idle" if used == 0 else "allocated" if used >= total else "mixed"
    if cpu_used == 0:
        return "idle"
    return "allocated" if cpu_used >= node["cpu_millis"] else "mixed"


def node_reason(node: dict[str, Any]) -> str:
    """Why a node takes no new work (sinfo -R), empty when it does."""
    if node["state"] == "lost":
        return "agent silent (no heartbeat); its jobs were requeued or failed"
    if node["state"] == "fenced":
        return "agent back after it was lost; waiting for it to reconcile"
    if not node["schedulable"]:
        return node.get("drain_reason") or "drained"
    return ""


def node_rows(nodes: list[dict[str, Any]]) -> list[dict]:
    """One row per node: state, cards by model, in use and free, CPU and memory free, from
    what the server says every live allocation holds there (``devices_in_use``: a share or
    MIG slice makes a card busy too), whoever's it is — a member, who sees only its own
    team's allocations, still sees busy cards as busy."""
    rows = []
    for n in nodes:
        held = set(n["devices_in_use"])
        cpu, mem = n["cpu_allocated_millis"], n["mem_allocated_mib"]
        models = Counter(d["model"] for d in n["devices"])
        rows.append(
            {
                "node": n["name"],
                "pool": n.get("pool", ""),
                "state": node_state(n, len(held), cpu),
                "reason": node_reason(n),
                "models": dict(models),
                "cards": len(n["devices"]),
                "in_use": len(held),
                "free": len(n["devices"]) - len(held),
                "cpu_free": max(0, n["cpu_millis"] - cpu),
                "mem_free_mib": max(0, n["memory_mib"] - mem),
                "telemetry": [d.get("telemetry") or {} for d in n["devices"]],
            }
        )
    return rows


def summary(rows: list[dict]) -> list[dict]:
    """Per GPU model and state: nodes, cards, in use, free (sinfo's summary)."""
    out: dict[tuple[str, str], dict] = {}
    for r in rows:
        for model, count in (r["models"] or {"(no gpu)": 0}).items():
            entry = out.setdefault(
                (model, r["state"]),
                {
                    "model": model,
                    "state": r["state"],
                    "nodes": 0,
                    "cards": 0,
                    "in_use": 0,
                    "free": 0,
                },
            )
            entry["nodes"] += 1
            entry["cards"] += count
            share = count / r["cards"] if r["cards"] else 0
            entry["in_use"] += round(r["in_use"] * share)
            entry["free"] += round(r["free"] * share)
    return sorted(out.values(), key=lambda e: (e["model"], e["state"]))


def telemetry_cells(devices: list[dict[str, Any]]) -> list[str]:
    """A node's last telemetry: mean utilisation, device memory used, hottest card, watts."""
    tel = [x for x in devices if x]
    if not tel:
        return ["-", "-", "-", "-"]
    util = sum(x.get("util_pct") or 0 for x in tel) / len(tel)
    used = sum(x.get("mem_used_mib") or 0 for x in tel) // 1024
    temp = max(x.get("temp_c") or 0 for x in tel)
    watts = sum(x.get("power_w") or 0 for x in tel)
    return [f"{util:.0f}%", f"{used}G", f"{temp:.0f}C" if temp else "-", f"{watts:.0f}"]


def duration(seconds: float | None) -> str:
    """Slurm's elapsed format: M:SS, H:MM:SS or D-HH:MM:SS."""
    if seconds is None:
        return "-"
    s = int(max(0, seconds))
    days, s = divmod(s, 86400)
    hours, s = divmod(s, 3600)
    minutes, s = divmod(s, 60)
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{s:02d}"
    if hours:
        return f"{hours}:{minutes:02d}:{s:02d}"
    return f"{minutes}:{s:02d}"


def where(job: dict[str, Any]) -> str:
    """A running job's placement: node[devices], e.g. n01[0,1] n02[0-3]."""
    alloc = job.get("allocation") or {}
    parts = []
    for n in alloc.get("nodes", []):
        devices = sorted(d["device"] for d in n["devices"])
        slices = {d["mig_profile"] for d in n["devices"] if d.get("mig_profile")}
        shares = [
            d["compute_pct"]
            for d in n["devices"]
            if not d["exclusive"] and not d.get("mig_profile")
        ]
        text = n["node"] + (f"[{_ranges(devices)}]" if devices else "")
        if slices:
            text += "(" + ",".join(sorted(slices)) + ")"
        elif shares:
            text += f"({shares[0]}%)"
        parts.append(text)
    return " ".join(parts) or "-"


def _ranges(values: list[int]) -> str:
    out, start = [], None
    for i, v in enumerate(values):
        if start is None:
            start = v
        if i + 1 == len(values) or values[i + 1] != v + 1:
            out.append(str(start) if start == v else f"{start}-{v}")
            start = None
    return ",".join(out)


def queue_rows(pending: list[dict], running: list[dict], now: float | None = None) -> list[dict]:
    """squeue's view: pending in queue order (PD, time waited, reason), then running (R, time
    run, placement)."""
    now = time.time() if now is None else now
    rows = [
        {
            "id": q["id"],
            "tenant": q["tenant"],
            "user": q.get("submitted_by", ""),
            "name": q["name"],
            "st": "PD",
            "time": duration(q["waited_s"]),
            "left": limit(q.get("max_runtime_s")),
            "request": q.get("shape") or q["request"],
            "where": q["reason"],
        }
        for q in pending
    ]
    for j in running:
        started = j["started_at"] or j["submit_time"]
        cap = j.get("max_runtime_s")
        rows.append(
            {
                "id": j["id"],
                "tenant": j["tenant"],
                "user": j["submitted_by"],
                "name": j["name"],
                "st": "R" if j["state"] == "running" else "CF",  # configuring: admitted
                "time": duration(now - started),
                "left": limit(None if cap is None else max(0.0, started + cap - now)),
                "request": j.get("shape") or j["request"],
                "where": where(j),
            }
        )
    return rows


def limit(seconds: float | None) -> str:
    """Time left (or a pending job's limit) as squeue's TIME_LEFT: UNLIMITED without one."""
    return "UNLIMITED" if seconds is None else duration(seconds)


ACCT_FIELDS = (
    "id", "user", "tenant", "name", "state", "start", "end", "elapsed", "exit", "card_hours",
    "cpu_hours",
)  # fmt: skip


def acct_rows(jobs: list[dict], usage: list[dict]) -> list[dict]:
    """sacct's view of finished jobs: times, exit code, and the card-hours (whole-card
    equivalents: a share or MIG slice counts its fraction) and CPU-hours their usage records
    hold, per GPU model too."""
    by_job: dict[int, dict[str, float]] = {}
    cpu: Counter[int] = Counter()
    for u in usage:
        models = by_job.setdefault(u["job_id"], {})
        if u["model"] != "cpu":
            hours = u["compute_pct_seconds"] / 100 / 3600
            models[u["model"]] = models.get(u["model"], 0.0) + hours
        cpu[u["job_id"]] += u["cpu_milli_seconds"]
    rows = []
    for j in jobs:
        per_model = by_job.get(j["id"], {})
        start, end = j["started_at"], j["finished_at"]
        rows.append(
            {
                "id": j["id"],
                "user": j["submitted_by"],
                "tenant": j["tenant"],
                "name": j["name"],
                "state": j["state"],
                "start": start,
                "end": end,
                "elapsed": duration(end - start) if start and end else "-",
                "exit": j["exit_code"],
                "card_hours": round(float(sum(per_model.values())), 4),
                "card_hours_by_model": {m: round(h, 4) for m, h in sorted(per_model.items())},
                "cpu_hours": round(float(cpu[j["id"]]) / 1000 / 3600, 4),
            }
        )
    return rows
