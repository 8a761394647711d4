"""Slurm's output format strings, read and printed as Slurm's own commands do, so that a
script that parses ``squeue -o``, ``sinfo -o``, ``sacct --format`` gets the same columns:

- ``squeue``/``sinfo`` ``-o "%.18i %.9P %j"``: text before the first ``%`` is printed first;
  each ``%[.][width]LETTER`` is a field, ``.`` right-justifies it, a width pads it and cuts
  a longer value to it (a node list is not cut), text after the letter follows the field
  (Slurm's ``parse_format`` and ``_print_str``);
- ``-O "JobID:.19 ,Name:20"``: comma-separated names, ``:[.]width`` and a suffix; without a
  width a field is 20 wide, left-justified (``parse_long_format``);
- ``sacct --format=JobID,State%20``: names matched case-insensitively by prefix in the
  table's order, ``%N`` a width (right-justified); fields printed at their width followed by
  a space, cut with ``+`` at the end, under a header (right-justified, cut) and a line of
  dashes; ``-p``/``-P``:
  ``|``-separated, with or without the last ``|`` (``print_fields``).

A field gpupool has no value for at all is refused naming it (Slurm prints an error too);
one whose value has no meaning here prints what Slurm prints for an empty one (docs/slurm.md
lists them). Pure."""

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpupool.cli.output import visible
from gpupool.model import SpecError


@dataclass(frozen=True)
class Field:
    key: str  # the letter (``-o``) or the canonical name (``-O``, sacct)
    width: int  # 0: as wide as the value; -1: the widest value of the column (sinfo's ``#``)
    right: bool
    suffix: str = ""


@dataclass(frozen=True)
class Column:
    header: str
    value: Callable[[Any], str]
    # whether a longer value is cut to the width: node lists are not (a pending job's
    # reason in %R is, its running job's node list is not: Slurm's _print_job_reason_list)
    cut: Callable[[Any], bool] = lambda row: True


def parse_percent(fmt: str, known: Mapping[str, Column], what: str) -> tuple[str, list[Field]]:
    """``-o``'s format: (its prefix, its fields); a letter gpupool lacks is refused."""
    first = fmt.find("%")
    if first < 0:
        raise SpecError(f"{what}: {fmt!r} has no %field", field="format")
    prefix, fields = fmt[:first], []
    for token in fmt[first + 1 :].split("%"):
        if not token:
            continue
        i, right, width = 0, False, 0
        if token[0] == ".":
            right, i = True, 1
        if token[i : i + 1] == "#":  # sinfo: as wide as the column's widest value
            width, i = -1, i + 1
        while i < len(token) and token[i].isdigit():
            width, i = max(width, 0) * 10 + int(token[i]), i + 1
        if i >= len(token):
            raise SpecError(f"{what}: {fmt!r} ends in a field without a letter", field="format")
        letter, suffix = token[i], token[i + 1 :]
        if letter not in known:
            raise SpecError(
                f"{what}: %{letter} is not a field gpupool prints (it prints %"
                + " %".join(sorted(known, key=str.lower))
                + ")",
                field="format",
            )
        fields.append(Field(letter, width, right, suffix))
    return prefix, fields


def parse_long(fmt: str, names: Mapping[str, str], what: str) -> list[Field]:
    """``-O``'s format: ``Name[:[.][width]][suffix]``, comma-separated; ``names`` maps a
    lower-case name to its column key."""
    fields = []
    for token in fmt.split(","):
        if not token.strip():
            continue
        name, sep, rest = token.partition(":")
        key = names.get(name.strip().lower())
        if key is None:
            raise SpecError(
                f"{what}: {name.strip()!r} is not a field gpupool prints (it prints "
                + ", ".join(sorted(set(names)))
                + ")",
                field="format",
            )
        width, right, suffix = 20, False, ""
        if sep:
            right = rest.startswith(".")
            digits = rest[1:] if right else rest
            n = len(digits) - len(digits.lstrip("0123456789"))
            width, suffix = int(digits[:n] or 0), digits[n:]
        fields.append(Field(key, width, right, suffix))
    return fields


def _fit(text: str, width: int, right: bool, cut: bool) -> str:
    """Slurm's ``_print_str``: pad to ``width``, cut a longer value unless ``cut`` is off."""
    if width <= 0:
        return text
    if cut:
        text = text[:width]
    return text.rjust(width) if right else text.ljust(width)


def render(
    rows: Sequence[Any],
    prefix: str,
    fields: Sequence[Field],
    columns: Mapping[str, Column],
    header: bool = True,
) -> list[str]:
    """The lines ``squeue``/``sinfo`` print for ``rows``."""
    cells = [[visible(columns[f.key].value(r)) for f in fields] for r in rows]
    widths = []
    for i, f in enumerate(fields):
        widest = max([len(columns[f.key].header), *(len(c[i]) for c in cells)])
        widths.append(widest if f.width < 0 else f.width)
    out = []
    if header:
        out.append(
            prefix
            + "".join(
                _fit(columns[f.key].header, w, f.right, True) + f.suffix
                for f, w in zip(fields, widths, strict=True)
            )
        )
    for r, c in zip(rows, cells, strict=True):
        out.append(
            prefix
            + "".join(
                _fit(v, w, f.right, columns[f.key].cut(r)) + f.suffix
                for f, v, w in zip(fields, c, widths, strict=True)
            )
        )
    return [line.rstrip("\n") for line in out]


@dataclass(frozen=True)
class AcctField:
    name: str  # as sacct prints it in the header
    width: int  # negative: left-justified, positive: right-justified (sacct's field len)
    value: Callable[[Any], str | None]  # None: empty (Slurm prints nothing)


def parse_sacct(spec: str, table: Sequence[AcctField]) -> list[AcctField]:
    """sacct's ``--format``: names matched case-insensitively by prefix, in the table's
    order; ``%N`` a width, right-justified, ``%-N`` left-justified (sacct reads it with
    ``atoi``); an unknown one refused naming it."""
    out = []
    for token in spec.split(","):
        token = token.strip()
        if not token:
            continue
        name, pct, width = token.partition("%")
        found = next((f for f in table if f.name.lower() == name.lower()), None) or next(
            (f for f in table if f.name.lower().startswith(name.lower())), None
        )
        if found is None or not name:
            raise SpecError(
                f"--format: {name!r} is not an sacct field gpupool prints (it prints "
                + ", ".join(f.name for f in table)
                + ")",
                field="format",
            )
        if pct:
            if not width.removeprefix("-").isdigit() or int(width) == 0:
                raise SpecError(
                    f"--format: {token!r}: after % comes a width (%20, or %-20 left-justified)",
                    field="format",
                )
            found = AcctField(found.name, int(width), found.value)
        out.append(found)
    return out


def render_sacct(
    rows: Sequence[Any],
    fields: Sequence[AcctField],
    header: bool = True,
    parsable: str = "",
    delimiter: str = "|",
) -> list[str]:
    """sacct's lines; ``parsable``: "" (fixed width), "p" (``-p``: a delimiter after each
    field) or "P" (``-P``: none after the last)."""
    out = []
    lines = ([None] if header else []) + list(rows)
    for row in lines:
        cells = []
        for i, f in enumerate(fields):
            text = f.name if row is None else f.value(row)
            text = None if text is None else visible(text)
            if parsable:
                last = i == len(fields) - 1 and parsable == "P"
                cells.append((text or "") + ("" if last else delimiter))
                continue
            width = abs(f.width)
            shown = text if text is not None else " "
            if text is not None and len(text) > width and row is not None:
                shown = text[: width - 1] + "+"
            shown = shown[:width]
            right = f.width > 0 or row is None  # a header is right-justified (%*.*s)
            cells.append((shown.rjust(width) if right else shown.ljust(width)) + " ")
        out.append("".join(cells))
        if row is None and not parsable:
            out.append("".join("-" * abs(f.width) + " " for f in fields))
    return out
