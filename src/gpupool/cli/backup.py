"""``gpupool admin backup`` and ``gpupool admin restore``: the state of record to a file and
back (SQLite or PostgreSQL; docs/operations.md, "Backup and restore")."""

from pathlib import Path

import typer

from gpupool.cli.errors import friendly
from gpupool.cli.server import _settings
from gpupool.model import SpecError

DATA_DIR = typer.Option(None, help="The server's data directory (SQLite)")
DATABASE_URL = typer.Option(None, help="SQLAlchemy URL instead of SQLite")
CONFIG = typer.Option(None, help="A TOML or YAML settings file")


@friendly
def backup(
    file: Path = typer.Argument(..., help="The backup file to write (a new file)"),
    data_dir: Path = DATA_DIR,
    database_url: str = DATABASE_URL,
    config: Path = CONFIG,
) -> None:
    """Write a consistent backup of the database while servers run (SQLite: a copy through
    its backup API; PostgreSQL: pg_dump's custom format, which needs its client tools)."""
    from gpupool.server.db import backup as db_backup

    url = _settings(data_dir, database_url, config).db_url
    try:
        db_backup.backup(url, file)
    except db_backup.BackupError as exc:
        raise SpecError(str(exc)) from None
    typer.echo(f"backup written to {file} ({file.stat().st_size} bytes)")


@friendly
def restore(
    file: Path = typer.Argument(..., help="A backup written by gpupool admin backup"),
    data_dir: Path = DATA_DIR,
    database_url: str = DATABASE_URL,
    config: Path = CONFIG,
    force: bool = typer.Option(
        False, help="Restore even though a scheduler proved it leads in the last 15 s"
    ),
) -> None:
    """Replace the database with a backup, with every server stopped. The restored database
    gets a new restore epoch: agents follow its orders at once, keep the work it knows and
    stop what it does not (started after the backup)."""
    from gpupool.server.db import backup as db_backup

    url = _settings(data_dir, database_url, config).db_url
    try:
        done = db_backup.restore(url, file, force=force)
    except db_backup.BackupError as exc:
        raise SpecError(str(exc)) from None
    typer.echo(
        f"restored {file}: generation {done.generation}, restore epoch {done.epoch}; "
        "start the servers"
    )
