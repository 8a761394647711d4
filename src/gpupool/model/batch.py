"""sbatch habits, pure: Slurm's time formats and ``#GPUPOOL`` directive lines of a job script.

Times: ``MM``, ``MM:SS``, ``HH:MM:SS``, ``D-HH``, ``D-HH:MM``, ``D-HH:MM:SS`` (Slurm's
``--time``). A script's directives are its leading comment lines ``#GPUPOOL --gpu 2 --time
4:00:00``; parsing stops at the first line that is neither blank nor a comment, as sbatch's
does. The script itself travels as the job's command (its interpreter from the ``#!`` line, or
``/bin/sh``, with ``-c`` and the script's text), so nothing has to be copied to the node.
"""

import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field

from gpupool.model.errors import SpecError
from gpupool.model.units import UNIT_SECONDS

_TIME = re.compile(
    r"^(?:(?P<days>\d+)-(?P<dh>\d+)(?::(?P<dm>\d+)(?::(?P<ds>\d+))?)?"
    r"|(?P<a>\d+)(?::(?P<b>\d+)(?::(?P<c>\d+))?)?)$"
)
# directive options and whether each takes a value
DIRECTIVES = {
    "--gpu": True, "--gpu-mem": True, "--gpu-share": True, "--mig": True, "--cpu": True,
    "--mem": True, "--request": True, "--name": True, "--kind": True, "--priority-class": True,
    "--gang": True, "--time": True, "--tenant": True, "--array": True, "--dependency": True,
    "--output": True, "--error": True, "--chdir": True, "--hold": False,
}  # fmt: skip
MAX_ARRAY_TASKS = 1000  # Slurm's default MaxArraySize is 1001 (indices 0-1000)
MAX_ARRAY_INDEX = 100_000
DEPENDENCY_TYPES = ("afterok", "afterany", "afternotok")
_RANGE = re.compile(r"^(\d+)(?:-(\d+)(?::(\d+))?)?$")


_UNITS = re.compile(r"^(\d+d)?(\d+h)?(\d+m)?(\d+s)?$")


def parse_time(text: str, strict: bool = True) -> int:
    """Slurm's ``--time`` in seconds: ``90`` (minutes), ``1:30`` (minutes:seconds),
    ``4:00:00``, ``2-12`` (days-hours), ``2-12:30``, ``2-12:30:00``; also the units every other
    gpupool duration takes: ``2h``, ``90m``, ``1d12h``, ``45s``. ``strict``: fields past 59
    are refused (gpupool's own options); sbatch's reading (``strict=False``) adds them up as
    Slurm's ``time_str2secs`` does (``0:120:0`` is two hours)."""
    units = _UNITS.match(text.strip())
    if units is not None and any(units.groups()):
        total = sum(int(v[:-1]) * UNIT_SECONDS[v[-1]] for v in units.groups() if v)
        if total <= 0:
            raise SpecError(f"time: {text!r} is not a positive duration", field="time")
        return total
    m = _TIME.match(text.strip())
    if m is None:
        raise SpecError(
            f"time: {text!r} is not MM, MM:SS, HH:MM:SS, D-HH[:MM[:SS]] or a duration like 2h, "
            "90m, 1d12h",
            field="time",
        )
    bounded: list[int] = []  # fields that must stay below 60 (hours below 24 after days)
    if m["days"] is not None:
        days, hours = int(m["days"]), int(m["dh"])
        minutes, seconds = int(m["dm"] or 0), int(m["ds"] or 0)
        bounded = [minutes, seconds, hours * 60 // 24]
    elif m["c"] is not None:
        days, hours, minutes, seconds = 0, int(m["a"]), int(m["b"]), int(m["c"])
        bounded = [minutes, seconds]
    elif m["b"] is not None:
        days, hours, minutes, seconds = 0, 0, int(m["a"]), int(m["b"])
        bounded = [seconds]
    else:
        days, hours, minutes, seconds = 0, 0, int(m["a"]), 0
    if strict and any(v > 59 for v in bounded):
        raise SpecError(f"time: {text!r} has a field out of range", field="time")
    total = ((days * 24 + hours) * 60 + minutes) * 60 + seconds
    if total <= 0:
        raise SpecError(f"time: {text!r} is not a positive duration", field="time")
    return total


@dataclass
class Script:
    options: dict[str, str] = field(default_factory=dict)  # "--gpu" -> "2"
    command: list[str] = field(default_factory=list)


def directive_lines(text: str, prefix: str) -> Iterator[tuple[int, str]]:
    """(line number, what follows ``prefix``) of a script's directive lines: at its head, up
    to the first line that is neither blank nor a comment, as sbatch reads its own."""
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if (number == 1 and stripped.startswith("#!")) or not stripped:
            continue
        if not stripped.startswith("#"):
            return
        if stripped.startswith(prefix):
            yield number, stripped[len(prefix) :]


def parse_script(text: str, name: str = "script") -> Script:
    """The directives and the command of a job script; an unknown or malformed directive is
    an error naming its line."""
    lines = text.splitlines()
    options: dict[str, str] = {}
    for number, body in directive_lines(text, "#GPUPOOL"):
        try:
            words = shlex.split(body)
        except ValueError as exc:
            raise SpecError(f"{name}: line {number}: {exc}", field="script") from None
        i = 0
        while i < len(words):
            key, _, inline = words[i].partition("=")
            if key not in DIRECTIVES:
                raise SpecError(f"{name}: line {number}: unknown directive {key!r}", field="script")
            if not DIRECTIVES[key]:  # a flag
                if inline:
                    raise SpecError(f"{name}: line {number}: {key} takes no value", field="script")
                value = "true"
            elif inline:
                value = inline
            elif i + 1 < len(words):
                i += 1
                value = words[i]
            else:
                raise SpecError(f"{name}: line {number}: {key} needs a value", field="script")
            options[key] = value
            i += 1
    interpreter = ["/bin/sh"]
    if lines and lines[0].startswith("#!"):
        interpreter = shlex.split(lines[0][2:].strip()) or interpreter
    return Script(options, [*interpreter, "-c", text, name])


@dataclass(frozen=True)
class ArraySpec:
    indices: tuple[int, ...]
    limit: int | None  # at most this many tasks run at once (``%N``)


def parse_array(text: str) -> ArraySpec:
    """Slurm's ``--array``: ``0-99``, ``1,3,5``, ``0-15:4`` (step), ``0-99%10`` (at most 10
    at once); at most ``MAX_ARRAY_TASKS`` tasks, indices up to ``MAX_ARRAY_INDEX``."""
    spec, _, limit_text = text.strip().partition("%")
    limit = None
    if limit_text:
        if not (limit_text.isascii() and limit_text.isdigit()) or int(limit_text) < 1:
            raise SpecError(
                f"array: limit {limit_text!r} after % is not a positive number", field="array"
            )
        limit = int(limit_text)
    indices: set[int] = set()
    for part in spec.split(","):
        m = _RANGE.match(part.strip())
        if m is None:
            raise SpecError(
                f"array: {part.strip()!r} is not N, N-M or N-M:STEP (e.g. 0-99%10)", field="array"
            )
        first = int(m[1])
        last = int(m[2]) if m[2] is not None else first
        step = int(m[3]) if m[3] is not None else 1
        if last < first:
            raise SpecError(f"array: {part.strip()!r} ends before it starts", field="array")
        if step < 1:
            raise SpecError(f"array: {part.strip()!r} has a step below 1", field="array")
        if last > MAX_ARRAY_INDEX:
            raise SpecError(f"array: index {last} is above {MAX_ARRAY_INDEX}", field="array")
        if (last - first) // step + 1 + len(indices) > MAX_ARRAY_TASKS:
            raise SpecError(f"array: more than {MAX_ARRAY_TASKS} tasks", field="array")
        indices.update(range(first, last + 1, step))
    return ArraySpec(tuple(sorted(indices)), limit)


@dataclass(frozen=True)
class Dependency:
    type: str  # afterok, afterany or afternotok
    job: int


def parse_dependency(text: str) -> list[Dependency]:
    """Slurm's ``--dependency``: ``afterok:12:13,afterany:14`` (every condition must hold)."""
    deps: list[Dependency] = []
    for part in text.strip().split(","):
        kind, *ids = part.strip().split(":")
        if kind not in DEPENDENCY_TYPES:
            raise SpecError(
                f"dependency: {kind!r} is not one of {', '.join(DEPENDENCY_TYPES)} "
                "(e.g. afterok:12:13)",
                field="dependency",
            )
        if not ids or not all(i.isascii() and i.isdigit() and 0 < int(i) < 2**62 for i in ids):
            raise SpecError(
                f"dependency: {part.strip()!r} needs job ids, e.g. {kind}:12", field="dependency"
            )
        deps += [Dependency(kind, int(i)) for i in ids]
    return deps


# sbatch's filename patterns (man sbatch, "filename pattern"; Slurm's expand_stdio_fields):
# a number between % and the letter zero-pads a number (at most 10 digits)
_PATTERN = re.compile(r"%(\d*)(.)", re.DOTALL)
PATTERN_LETTERS = "AabJjNnstux"
NOT_KEPT = {"r": "the restart count is not kept", "S": "no SLUID"}  # Slurm has, gpupool not


def expand_output(
    pattern: str,
    job_id: int,
    array_job: int | None,
    index: int | None,
    name: str = "",
    user: str = "",
    node: str = "",
    node_index: int = 0,
) -> str:
    """sbatch's ``--output`` / ``--error`` patterns as Slurm expands them for a batch script:
    ``%j`` job id, ``%J`` job id (``jobid.stepid`` for a step: the batch script's is the id),
    ``%A`` array job id (the job id outside an array), ``%a`` task index, ``%b`` index modulo
    10, ``%x`` job name, ``%u`` user, ``%N`` node, ``%n`` node index (each part of a job
    spanning nodes writes its own), ``%t`` task rank (0: the batch script), ``%s`` step
    (``batch``), ``%%`` a percent sign; ``%4j`` zero-pads to 4 digits. Another letter stays
    as written, as in Slurm; a pattern with a backslash is not expanded, its backslashes
    dropped. Outside an array ``%a`` and ``%b`` are empty (Slurm prints 4294967294 and 4)."""
    if "\\" in pattern:
        return pattern.replace("\\", "")
    numbers = {
        "j": job_id,
        "J": job_id,
        "A": array_job if array_job is not None else job_id,
        "a": index,
        "b": None if index is None else index % 10,
        "n": node_index,
        "t": 0,
    }
    words = {"x": name.replace("/", "_") or "job", "u": user.replace("/", "_"),
             "N": node.replace("/", "_"), "s": "batch"}  # fmt: skip

    def one(m: re.Match[str]) -> str:
        pad, letter = m[1], m[2]
        if letter == "%" and not pad:
            return "%"
        if letter in numbers:
            value = numbers[letter]
            return "" if value is None else f"{value:0{min(int(pad or 0), 10)}d}"
        if letter in words:
            return words[letter]
        return m[0]  # not a pattern: kept as written, as Slurm keeps it

    return _PATTERN.sub(one, pattern)


def check_pattern(path: str, field: str = "output") -> str:
    """A filename pattern gpupool can expand as Slurm does: ``%r`` (restart count) and ``%S``
    (SLUID) are Slurm's and not kept here: refused naming them."""
    if "\\" not in path:
        for m in _PATTERN.finditer(path):
            if m[2] in NOT_KEPT:
                raise SpecError(
                    f"{field}: %{m[2]} in {path[:80]!r}: {NOT_KEPT[m[2]]} here", field=field
                )
    return path


def check_directory(path: str, field: str) -> str:
    """A job's working directory (``--chdir``, the submit directory): an absolute path of at
    most 4,096 characters without NUL or line breaks. It is entered on the node by the job's
    own user, never by a privileged process."""
    if not path.startswith("/") or len(path) > 4096 or any(c in path for c in "\x00\n\r"):
        raise SpecError(
            f"{field}: {path[:80]!r} is not an absolute path (at most 4,096 characters, no "
            "NUL or line break)",
            field=field,
        )
    return path


def check_output_path(path: str, field: str = "output") -> str:
    """An ``--output`` / ``--error`` path: relative to the job's working directory or absolute
    (shared storage: ``/scratch/...``), as in Slurm; its node writes it as the job's own user,
    never as root, so the file system's permissions decide. Not empty, no NUL or line break;
    no leading ``~`` (Slurm does not expand it: it would name a folder called ``~``). Where the
    submitter's own gpupool saves what its node could not write, only paths inside the submit
    directory are saved (``deliverable``). Returns the path."""
    if not path or any(c in path for c in "\x00\n\r"):
        raise SpecError(f"{field}: an empty path or one with a NUL or line break", field=field)
    if path.startswith("~"):
        raise SpecError(
            f"{field}: {path[:80]!r} starts with ~, which sbatch does not expand: give the "
            "path itself (absolute, or relative to the job's working directory)",
            field=field,
        )
    return path


def deliverable(path: str) -> bool:
    """Whether the submitter's own gpupool may save ``path`` (a job's output its node did not
    write) in the submit directory: relative and inside it (no ``..``). An absolute path is
    its node's alone, written as the job's user (a job's output used to be written wherever
    its submitter said — ``job wait`` run by an admin overwrote the admin's ``~/.bashrc``)."""
    return not path.startswith("/") and all(part != ".." for part in re.split(r"[/\\]", path))
