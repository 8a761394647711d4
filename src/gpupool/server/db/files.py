"""Files of the state of record are private to the server's user: the data directory 0700,
the SQLite database and its side files 0600 (they hold jobs' environments and logs)."""

import os
from pathlib import Path

SQLITE_SUFFIXES = ("", "-wal", "-shm", "-journal", ".write-lock")


def private_dir(path: Path) -> None:
    """Create ``path`` (and missing parents) readable by its owner only (0700). An existing
    directory keeps its mode: it may be one the operator chose to share (the files gpupool
    puts there are 0600 themselves)."""
    if not path.exists():
        path.mkdir(parents=True, exist_ok=True)
        path.chmod(0o700)


def private_sqlite_file(path: Path) -> None:
    """The database holds jobs' environments, commands and logs: its file and SQLite's side
    files (which SQLite creates with the main file's mode) are 0600."""
    os.close(os.open(path, os.O_RDWR | os.O_CREAT, 0o600))
    for suffix in SQLITE_SUFFIXES:
        side = Path(f"{path}{suffix}")
        try:
            if side.stat().st_mode & 0o077:
                side.chmod(0o600)
        except OSError:  # not there, or not ours to change
            continue
