"""Every command's --help at 80 columns (issue 47): no line wider than the terminal, no type
column squeezing the help into a sliver, no ``<bool>`` on flags, no markup shown raw (a
``\\[`` escape or Markdown's ``**`` and backticks)."""

from typer.main import get_command
from typer.testing import CliRunner

from gpupool.cli.main import app

RAW_MARKUP = ("**", "`", "\\[", "<bool>")


def _commands(command, path: list[str]):
    yield path, command
    if hasattr(command, "commands"):  # a group (typer carries its own click)
        for name, sub in command.commands.items():
            yield from _commands(sub, [*path, name])


def test_every_help_fits_80_columns_and_reads_as_text():
    runner = CliRunner()
    seen, problems = 0, []
    for path, _ in _commands(get_command(app), []):
        out = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "80"}).output
        seen += 1
        for line in out.splitlines():
            if len(line) > 80 or any(mark in line for mark in RAW_MARKUP):
                problems.append(f"{' '.join(path) or 'gpupool'}: {line!r}")
    assert seen > 100  # every command and group was asked
    assert problems == []


def test_a_flags_help_says_the_flag_and_its_words_on_one_wide_column():
    out = CliRunner().invoke(app, ["up", "--help"], env={"COLUMNS": "80"}).output
    demo = next(line for line in out.splitlines() if "--demo" in line)
    assert demo.split()[:3] == ["--demo", "/", "--no-demo"]
    assert "Also submit a realistic mix of jobs" in demo  # not folded into a narrow column
