"""What a root ``gpupool up`` shares with its host: the Unix users its teams' jobs run as
(``gp-<team>``, created on first use and kept: files a team wrote on shared storage stay
theirs) and the work folder ``/var/lib/gpupool/work``.

Two instances on one host (two data folders, two ports) must not run their teams as the same
users: a ``devtest`` job of one could read what a ``devtest`` job of the other left. Each
instance therefore claims a user prefix in a host-wide registry (``/run/gpupool``, as the
agents' other shared tables): ``gp-`` when no live instance holds it, else ``gp2-``,
``gp3-``..., said in the banner. The prefix is kept in the data folder, so an instance's
teams keep their users from one start to the next while it is free. On its way out ``up``
says what it leaves on the host and how to remove it."""

import os
import pwd
from pathlib import Path

from gpupool.agent import processes as proc
from gpupool.agent.host_registry import locked_json

REGISTRY = Path("/run/gpupool/up-instances.json")
PREFIX_FILE = "user-prefix"
DEFAULT_PREFIX = "gp-"
COMMENT = "gpupool tenant "  # what the agent writes in the users it creates (identity.py)


def _alive(holder: dict) -> bool:
    try:
        pid, ticks = int(holder["pid"]), int(holder["ticks"])
    except (KeyError, TypeError, ValueError):
        return False
    return proc.start_ticks(pid) == ticks


def claim_prefix(data_dir: Path, registry: Path = REGISTRY) -> tuple[str, str]:
    """This instance's user prefix and a line for its banner ("" for the default one)."""
    saved_file = data_dir / PREFIX_FILE
    try:
        saved = saved_file.read_text().strip() or None
    except OSError:
        saved = None
    me = {"pid": os.getpid(), "ticks": proc.start_ticks(os.getpid()), "data_dir": str(data_dir)}
    with locked_json(registry) as known:
        live = {p: h for p, h in known.items() if _alive(h) and h.get("data_dir") != str(data_dir)}
        wanted = saved or DEFAULT_PREFIX
        prefix = wanted
        n = 2
        while prefix in live:
            prefix = f"gp{n}-"
            n += 1
        known.clear()
        known.update(live)
        known[prefix] = me
    saved_file.write_text(prefix + "\n")
    if prefix == wanted:
        note = "" if prefix == DEFAULT_PREFIX else f"teams' jobs run as {prefix}<team>"
        return prefix, note
    other = live[wanted]
    return prefix, (
        f"teams' jobs run as {prefix}<team>: {wanted}<team> belongs to the gpupool up of "
        f"{other.get('data_dir')} (pid {other.get('pid')}), and two instances never share a "
        "team's user"
    )


def release_prefix(prefix: str, registry: Path = REGISTRY) -> None:
    with locked_json(registry) as known:
        holder = known.get(prefix)
        if holder is not None and holder.get("pid") == os.getpid():
            del known[prefix]


def left_behind(prefix: str, work_dir: Path) -> str:
    """What stays on the host after ``up`` stops, and how to remove it."""
    users = sorted(
        e.pw_name
        for e in pwd.getpwall()
        if e.pw_name.startswith(prefix) and e.pw_gecos.startswith(COMMENT)
    )
    said = []
    if users:
        said.append(
            f"Unix users {', '.join(users)} (its teams' jobs ran as them; remove with: userdel "
            f"{' '.join(users)})"
        )
    said.append(
        f"the work folder {work_dir} (shared by every gpupool up here; rm -r it when none runs)"
    )
    return "left on this host for the next start: " + "; ".join(said)
