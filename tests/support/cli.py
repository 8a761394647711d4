"""The CLI run in this process (click's runner): the same parsing, commands and output as
``gpupool ...`` in a shell, without an interpreter start and its imports (1.2–1.6 s a call,
some two hundred calls in the suite). Tests that need what only a process has — its own
signals, stdin and file descriptors, children writing to its terminal — ask for one."""

import os
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class Ran:
    """What a run left: the fields of ``subprocess.CompletedProcess`` the tests read."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str
    exception: BaseException | None = field(default=None, repr=False)


def _build_the_command_once() -> None:
    """typer's runner builds click's command tree from the app at every call: two thirds of
    a call's time (83 of 123 ms, measured with cProfile). The tree is the same each time."""
    import typer.main
    import typer.testing

    if getattr(typer.testing, "_gpupool_cached", False):
        return
    built: dict[int, object] = {}

    def cached(app):
        if id(app) not in built:
            built[id(app)] = typer.main.get_command(app)
        return built[id(app)]

    typer.testing._get_command = cached  # type: ignore[attr-defined]
    typer.testing._gpupool_cached = True  # type: ignore[attr-defined]


def run_in_process(
    args: list[str], env: dict[str, str] | None, stdin: str | None, cwd: Path | None
) -> Ran:
    """Invoke the app as ``gpupool ARGS``. ``sys.argv``, the environment (``TZ`` applied) and
    the working folder are the command's while it runs and put back afterwards (a command may
    set variables, e.g. ``--profile``). An exception the CLI let escape is written to stderr
    as its traceback, as the interpreter would: a test that says "no traceback" still fails
    on one."""
    from typer.testing import CliRunner

    from gpupool.cli.main import app

    _build_the_command_once()

    saved_env, saved_cwd, saved_argv = dict(os.environ), os.getcwd(), sys.argv
    try:
        os.environ.update(env or {})
        time.tzset()
        sys.argv = ["gpupool", *args]
        if cwd is not None:
            os.chdir(cwd)
        result = CliRunner().invoke(app, args, input=stdin, prog_name="gpupool")
    finally:
        os.chdir(saved_cwd)
        sys.argv = saved_argv
        os.environ.clear()
        os.environ.update(saved_env)
        time.tzset()
    stderr = result.stderr
    error = result.exception
    if error is not None and not isinstance(error, SystemExit):
        stderr += "Traceback (most recent call last):\n"
        stderr += "".join(traceback.format_exception(error)[1:])
    return Ran(args, result.exit_code, result.stdout, stderr, error)


def gpupool(
    *args: str,
    timeout: int = 180,
    env: dict[str, str] | None = None,
    stdin: str | None = None,
    cwd: Path | None = None,
    process: bool = False,
) -> "subprocess.CompletedProcess[str] | Ran":
    """Run the CLI as a user does: in this process (``tests.support.cli``), or with
    ``process`` a real one, output captured."""
    if not process:
        return run_in_process(list(args), env, stdin, cwd)
    return subprocess.run(
        [sys.executable, "-m", "gpupool.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=None if env is None else {**os.environ, **env},
        input=stdin,
        cwd=cwd,
    )
