"""Slurm's host lists: ``node-[01-03],gpu7`` for node-01, node-02, node-03 and gpu7 (what
``SLURM_JOB_NODELIST`` holds; ``agent/slurm_tools/scontrol.py`` expands them in the job).
Pure."""

import re
from itertools import groupby

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
