"""How much disk a workload's working folder takes, to enforce ``--disk-max``: the blocks its
files really use (a sparse file counts what it wrote), walking the folder without following
symbolic links and without leaving its filesystem, and giving up counting — as "over" — past a
number of entries (a job making millions of empty files is itself filling the host)."""

import os
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class Usage:
    bytes: int
    entries: int
    complete: bool  # False: stopped at max_entries
    timed_out: bool = False  # stopped at its deadline: no verdict


def folder_usage(path: str, max_entries: int = 200_000, deadline: float | None = None) -> Usage:
    """``deadline`` (monotonic): a walk still going then stops, with no verdict."""
    total = entries = 0
    try:
        device = os.lstat(path).st_dev
    except OSError:
        return Usage(0, 0, True)
    stack = [path]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as it:
                for entry in it:
                    entries += 1
                    if entries > max_entries:
                        return Usage(total, entries, False)
                    if deadline is not None and entries % 1000 == 0 and time.monotonic() > deadline:
                        return Usage(total, entries, True, timed_out=True)
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except OSError:
                        continue
                    total += info.st_blocks * 512
                    if entry.is_dir(follow_symlinks=False) and info.st_dev == device:
                        stack.append(entry.path)
        except OSError:
            continue
    return Usage(total, entries, True)


def over_disk(usage: Usage, limit_mib: int) -> str | None:
    """The reason a workload is stopped, or None while it is within its limit."""
    if limit_mib <= 0 or usage.timed_out:
        return None
    if not usage.complete:
        return f"disk: its working folder holds more than {usage.entries - 1} files and folders"
    if usage.bytes > limit_mib * 1024 * 1024:
        return (
            f"disk: its working folder used {usage.bytes // (1024 * 1024)} MiB, more than its "
            f"{limit_mib} MiB limit"
        )
    return None
