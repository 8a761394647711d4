"""sbatch's options as Slurm spells them: long and short names, which take a value, and what
gpupool does with each — honours it, warns that it has no effect here (only where ignoring it
cannot change where or how the job runs), or refuses it naming why. Reading ``#SBATCH`` lines
and command-line words into (option, value) pairs, as sbatch's getopt does. Pure."""

import shlex
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from gpupool.model.batch import directive_lines
from gpupool.model.errors import SpecError

Refuse = Callable[[str], None]  # collects a refusal of the script itself (sbatch_plan.SCRIPT)
HETJOB = (
    "a heterogeneous job (#SBATCH hetjob: components of different shapes started together) "
    "is not supported: gpupool starts a job of one shape; submit each component as a job of "
    "its own (--dependency to order them)"
)


class Takes(Enum):
    VALUE = "value"
    NONE = "none"
    OPTIONAL = "optional"  # --exclusive[=user]: a value only after =


HONOURED = {
    "job-name": Takes.VALUE, "time": Takes.VALUE, "nodes": Takes.VALUE, "ntasks": Takes.VALUE,
    "ntasks-per-node": Takes.VALUE, "cpus-per-task": Takes.VALUE, "gres": Takes.VALUE,
    "gpus": Takes.VALUE, "gpus-per-node": Takes.VALUE, "gpus-per-task": Takes.VALUE,
    "cpus-per-gpu": Takes.VALUE, "mem": Takes.VALUE, "mem-per-cpu": Takes.VALUE,
    "mem-per-gpu": Takes.VALUE, "array": Takes.VALUE, "output": Takes.VALUE,
    "error": Takes.VALUE, "dependency": Takes.VALUE, "chdir": Takes.VALUE, "hold": Takes.NONE,
    "account": Takes.VALUE, "qos": Takes.VALUE, "partition": Takes.VALUE,
    "constraint": Takes.VALUE, "wait": Takes.NONE, "wait-all-nodes": Takes.VALUE,
    "requeue": Takes.NONE, "export": Takes.VALUE, "wrap": Takes.VALUE, "parsable": Takes.NONE,
    "signal": Takes.VALUE, "exclusive": Takes.OPTIONAL, "nodelist": Takes.VALUE,
    "exclude": Takes.VALUE, "begin": Takes.VALUE,
}  # fmt: skip
# accepted with a warning: they change neither where nor how the job runs here
NO_EFFECT = {
    "mail-type": "mail is not sent", "mail-user": "mail is not sent",
    "comment": "kept nowhere", "verbose": "", "quiet": "",
    "open-mode": "the node writes --output once, at the job's end",
    "acctg-freq": "usage is metered from the allocation", "profile": "",
    "hint": "gpupool does not bind tasks to cores or threads: each CPU asked is one of the "
    "node's CPUs, the kernel schedules its threads",
}  # fmt: skip
NO_EFFECT_TAKES = {"verbose": Takes.NONE, "quiet": Takes.NONE}
REFUSED = {
    "deadline": "no deadline",
    "time-min": "no flexible time limit: give --time",
    "no-requeue": "a job is requeued when its node is lost (submit with on_lost=fail "
    "through the API instead)",
    "gpu-bind": "no GPU binding", "gpu-freq": "no GPU clock setting",
    "distribution": "no task distribution", "tmp": "no node-local disk",
    "licenses": "no licenses", "reservation": "reservations are the administrator's "
    "(gpupool reservation)", "switches": "use a topology= request (leaf, block...)",
    "oversubscribe": "no oversubscription", "overcommit": "no overcommit",
    "contiguous": "no contiguous nodes", "core-spec": "no core specialisation",
    "threads-per-core": "no thread layout", "sockets-per-node": "no socket layout",
    "cores-per-socket": "no core layout", "ntasks-per-core": "no core layout",
    "ntasks-per-socket": "no socket layout", "ntasks-per-gpu": "no per-GPU tasks",
    "network": "no network options", "nice": "use --qos (a priority class)",
    "priority": "use --qos (a priority class)", "kill-on-invalid-dep": "",
    "propagate": "no resource limits propagated", "uid": "", "gid": "",
    "clusters": "one pool", "mincpus": "ask --cpus-per-task", "tres-per-task": "",
    "mem-bind": "no memory binding", "cpu-freq": "no CPU clock setting",
    "get-user-env": "the job gets --export's variables", "input": "no stdin",
    "no-kill": "a gang ends with any of its nodes", "batch": "", "extra-node-info": "",
    "nodefile": "gpupool places jobs itself", "wckey": "", "container": "use an image job "
    "(gpupool job submit --image)", "test-only": "", "use-min-nodes": "",
    "thread-spec": "", "spread-job": "", "power": "", "bb": "", "bbf": "",
    "delay-boot": "", "reboot": "", "x11": "", "prefer": "use --constraint",
}  # fmt: skip
REFUSED_TAKES = {
    "no-requeue": Takes.NONE, "overcommit": Takes.NONE,
    "oversubscribe": Takes.NONE, "contiguous": Takes.NONE, "no-kill": Takes.OPTIONAL,
    "use-min-nodes": Takes.NONE, "test-only": Takes.NONE, "spread-job": Takes.NONE,
    "reboot": Takes.NONE, "x11": Takes.OPTIONAL, "kill-on-invalid-dep": Takes.VALUE,
}  # fmt: skip
SHORT = {
    "J": "job-name", "t": "time", "N": "nodes", "n": "ntasks", "c": "cpus-per-task",
    "G": "gpus", "a": "array", "o": "output", "e": "error", "d": "dependency", "D": "chdir",
    "H": "hold", "A": "account", "p": "partition", "q": "qos", "C": "constraint",
    "w": "nodelist", "x": "exclude", "W": "wait", "s": "oversubscribe", "k": "no-kill",
    "v": "verbose", "Q": "quiet", "i": "input", "B": "extra-node-info", "L": "licenses",
    "M": "clusters", "m": "distribution", "S": "core-spec", "F": "nodefile", "b": "begin",
    "O": "overcommit",
}  # fmt: skip
ALIASES = {
    "workdir": "chdir", "mem_per_cpu": "mem-per-cpu", "share": "oversubscribe",
    "tasks-per-node": "ntasks-per-node",
}  # fmt: skip


def long_name(name: str, where: str) -> str:
    """A long option as getopt reads it: its full name, an alias, or a prefix of exactly one
    (``--out`` is ``--output``, ``--part`` is ``--partition``)."""
    name = ALIASES.get(name, name)
    if known(name):
        return name
    every = [*HONOURED, *NO_EFFECT, *REFUSED, *ALIASES]
    matches = sorted({ALIASES.get(n, n) for n in every if n.startswith(name)})
    if len(matches) == 1 and name:
        return matches[0]
    if len(matches) > 1:
        raise SpecError(
            f"{where}: --{name} is ambiguous ({', '.join('--' + m for m in matches[:4])})",
            field="script",
        )
    raise SpecError(f"{where}: unknown sbatch option --{name}", field="script")


@dataclass(frozen=True, slots=True)
class Option:
    name: str  # the long name, e.g. "gres"
    value: str | None
    where: str  # "line 4" of the script, or "the command line"


def takes(name: str) -> Takes:
    if name in HONOURED:
        return HONOURED[name]
    if name in NO_EFFECT:
        return NO_EFFECT_TAKES.get(name, Takes.VALUE)
    return REFUSED_TAKES.get(name, Takes.VALUE)


def known(name: str) -> bool:
    return name in HONOURED or name in NO_EFFECT or name in REFUSED


def _raise(text: str) -> None:
    raise SpecError(text, field="script")


def read_words(
    words: list[str], where: str, refuse: Refuse = _raise
) -> tuple[list[Option], list[str]]:
    """sbatch's options at the head of ``words`` and what follows them (the script and its
    arguments, on a command line). What is not an option sbatch reads is refused through
    ``refuse`` (by default at once; a collector checks the rest too)."""
    out: list[Option] = []
    i = 0
    while i < len(words):
        word = words[i]
        if word == "--":
            return out, words[i + 1 :]
        if word == ":":  # sbatch's separator of a heterogeneous job's components
            refuse(f"{where}: {HETJOB}")
            i += 1
            continue
        if not word.startswith("-") or word == "-":
            return out, words[i:]
        try:
            option, i = _one(words, i, where)
        except SpecError as exc:
            refuse(str(exc))
            i += 1
            continue
        out.append(option)
    return out, []


def _one(words: list[str], i: int, where: str) -> tuple[Option, int]:
    """The option at ``words[i]`` and where the next one starts."""
    word = words[i]
    if word.startswith("--"):
        name, eq, inline = word[2:].partition("=")
        name = long_name(name, where)
        value: str | None = inline if eq else None
    else:
        letter, rest = word[1:2], word[2:]
        if letter not in SHORT:
            raise SpecError(f"{where}: unknown sbatch option -{letter}", field="script")
        name = SHORT[letter]
        value = rest.removeprefix("=") if rest else None
    kind = takes(name)
    if kind is Takes.NONE and value is not None:
        raise SpecError(f"{where}: --{name} takes no value", field="script")
    if kind is Takes.VALUE and value is None:
        if i + 1 >= len(words):
            raise SpecError(f"{where}: --{name} needs a value", field="script")
        i += 1
        value = words[i]
    return Option(name, value, where), i + 1


def script_options(text: str, name: str = "script", refuse: Refuse = _raise) -> list[Option]:
    """The ``#SBATCH`` lines of a batch script, as sbatch reads them: at its head, up to the
    first line that is neither blank nor a comment; a ``#SBATCH`` line's words after the
    first ``#`` that is not quoted are a comment. ``#SBATCH hetjob`` (a heterogeneous job's
    next component) is refused naming it."""
    out: list[Option] = []
    for number, body in directive_lines(text, "#SBATCH"):
        if body and not (body[0].isspace() or body[0] == "-"):
            continue  # "#SBATCHX": not a directive ("#SBATCH--time=1" is one)
        where = f"{name}: line {number}"
        try:
            lexer = shlex.shlex(body, posix=True)
            lexer.whitespace_split, lexer.commenters = True, "#"
            words = list(lexer)
        except ValueError as exc:
            refuse(f"{where}: {exc}")
            continue
        if words and words[0] in ("hetjob", "packjob"):
            refuse(f"{where}: {HETJOB}")
            continue
        options, rest = read_words(words, where, refuse)
        if rest:
            refuse(f"{where}: {rest[0]!r} is not an sbatch option")
        out += options
    return out
