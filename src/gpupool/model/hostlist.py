"""Slurm's host lists: ``node-[01-03],gpu7`` for node-01, node-02, node-03 and gpu7 (what
``SLURM_JOB_NODELIST`` holds; ``agent/slurm_tools/scontrol.py`` expands them in the job).
Pure."""

import re
from itertools import groupby

from gpupool.model.errors import SpecError

_NUMBERED = re.compile(r"^(.*?)(\d+)$")


def compress(names: list[str]) -> str:
    """Runs of names that differ only in a number of the same width, as ``prefix[a-b,c]``."""
    keyed = []
    for name in names:
        m = _NUMBERED.match(name)
        keyed.append((m[1], len(m[2]), int(m[2]), name) if m else (name, -1, 0, name))
    parts = []
    for (prefix, width), group in groupby(keyed, key=lambda k: (k[0], k[1])):
        items = list(group)
        if width < 0 or len(items) == 1:
            parts += [k[3] for k in items]
            continue
        runs: list[list[int]] = []
        for _, _, number, _ in items:
            if runs and number == runs[-1][1] + 1:
                runs[-1][1] = number
            else:
                runs.append([number, number])
        shown = [f"{a:0{width}d}" if a == b else f"{a:0{width}d}-{b:0{width}d}" for a, b in runs]
        parts.append(f"{prefix}[{','.join(shown)}]")
    return ",".join(parts)


_ITEM = re.compile(r"[^,\[]+(?:\[[^\]]*\][^,\[]*)*")
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")
MAX_HOSTS = 100_000


def expand(text: str, what: str = "nodelist") -> list[str]:
    """``node-[01-03],gpu7`` as its names, in order, each once (Slurm's ``hostlist_uniq``);
    a malformed list is refused naming it."""
    out: list[str] = []
    items = _ITEM.findall(text.strip())
    if ",".join(items) != text.strip():
        raise SpecError(f"{what}: {text[:80]!r} is not a node list like n[01-04],gpu7", field=what)
    for item in items:
        out += _expand_item(item.strip(), what)
        if len(out) > MAX_HOSTS:
            raise SpecError(f"{what}: {text[:80]!r} names more than {MAX_HOSTS} nodes", field=what)
    names = list(dict.fromkeys(n for n in out if n))
    if not names or any(c in text for c in " \t\n"):
        raise SpecError(f"{what}: {text[:80]!r} is not a node list like n[01-04],gpu7", field=what)
    return names


def _expand_item(item: str, what: str) -> list[str]:
    m = re.match(r"^(.*?)\[([^\]]+)\](.*)$", item)
    if m is None:
        if "[" in item or "]" in item:
            raise SpecError(f"{what}: {item!r} has an unclosed bracket", field=what)
        return [item]
    out: list[str] = []
    for run in m[2].split(","):
        r = _RANGE.match(run.strip())
        if r is None or (r[2] is not None and int(r[2]) < int(r[1])):
            raise SpecError(f"{what}: {run!r} in {item!r} is not N or N-M", field=what)
        width = len(r[1])
        for n in range(int(r[1]), int(r[2] or r[1]) + 1):
            out += _expand_item(f"{m[1]}{n:0{width}d}{m[3]}", what)
            if len(out) > MAX_HOSTS:
                raise SpecError(f"{what}: {item!r} names too many nodes", field=what)
    return out
