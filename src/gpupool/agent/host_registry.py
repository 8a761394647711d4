"""A small JSON file that the agents of one host share (which /30 each tenant namespace uses,
which ports replicas hold), read and written under an exclusive file lock so two agents never
hand out the same thing; it lives under ``/run`` (root) and goes at boot, like what it
describes."""

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any


@contextlib.contextmanager
def locked_json(path: Path) -> Iterator[dict[str, Any]]:
    """The file's content (``{}`` when missing or unreadable), written back on leaving."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with open(path.with_suffix(".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            known = json.loads(path.read_text()) if path.exists() else {}
        except ValueError:
            known = {}
        yield known
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(known))
        os.replace(tmp, path)
