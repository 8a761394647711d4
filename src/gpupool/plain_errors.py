"""A request that fails validation, said in the field's own terms (issue 59, finding 9): the
API answered pydantic's words — ``max_runtime_s: Input should be less than or equal to
31622400``, ``nominal: Input should be greater than or equal to 0``, a tenant name against a
regular expression. Every error pydantic gives is phrased here, once, for every route: the
bound with its unit (``at most 366 days (31622400 s)``), what a name may hold, the values a
choice takes. The CLI then says the option it sent the field as (``--time: …``)."""

import re
from typing import Any

# what a pattern of ours asks for, in words (tests/unit/test_plain_errors.py checks that every
# pattern the API declares is here)
PATTERNS = {
    r"^[A-Za-z0-9][A-Za-z0-9._-]*$": "a name is letters A-Z and a-z, digits, '.', '_' and '-', "
    "starting with a letter or digit",
    r"^[A-Za-z0-9][A-Za-z0-9._:-]*$": "a node name is letters A-Z and a-z, digits, '.', '_', "
    "':' and '-', starting with a letter or digit",
    r"^([A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?/)?[A-Za-z0-9]([A-Za-z0-9_.-]{0,61}"
    r"[A-Za-z0-9])?$": "a label key is [prefix/]name as in Kubernetes: a name of at most 63 "
    "letters, digits, '.', '_' and '-', starting and ending with a letter or digit",
    r"^[^\x00]*$": "a label value may not hold a NUL character",
    r"^[A-Za-z0-9:._-]+$": "letters A-Z and a-z, digits, ':', '.', '_' and '-'",
    r"^\d{4}-\d{2}$": "a month is YYYY-MM",
    r"^\d{4}-(0[1-9]|1[0-2])$": "a month is YYYY-MM",
    r"^/[\x21-\x7e]*$": "a path is '/' then printable ASCII without spaces",
    r"^[A-Za-z0-9-]+$": "letters A-Z and a-z, digits and '-'",
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?)?$": "a cluster name is a DNS label: lowercase letters, "
    "digits and '-', starting and ending with a letter or digit",
}
# pydantic's own words, none of which should reach a person
VALIDATOR_WORDS = ("Input should", "String should", "List should", "Value error,",
                   "Field required", "Extra inputs", "Assertion failed,")  # fmt: skip


def _number(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _seconds(n: float) -> str:
    """366 days, 2 hours, 90 minutes: a whole number of the largest unit that fits."""
    for size, unit in ((86400, "day"), (3600, "hour"), (60, "minute")):
        if n >= size and n % size == 0:
            count = int(n // size)
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return ""


def _mib(n: float) -> str:
    for size, unit in ((1024 * 1024, "TiB"), (1024, "GiB")):
        if n >= size and n % size == 0:
            return f"{int(n // size)} {unit}"
    return ""


def bound(field: str, value: Any) -> str:
    """A bound in the field's unit: ``366 days (31622400 s)``, ``16 TiB (16777216 MiB)``."""
    name = field.rsplit(".", 1)[-1]
    text = _number(value)
    if name.endswith("_s") and isinstance(value, int | float):
        human = _seconds(value)
        return f"{human} ({text} s)" if human else f"{text} s"
    if name.endswith("_mib") and isinstance(value, int | float):
        human = _mib(value)
        return f"{human} ({text} MiB)" if human else f"{text} MiB"
    if name.endswith("_pct"):
        return f"{text}%"
    return text


def _choices(expected: str) -> str:
    """pydantic's ``'a', 'b' or 'c'`` as ``a, b or c``."""
    return re.sub(r"'([^']*)'", r"\1", expected)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def plain(error: dict[str, Any], field: str) -> str:
    """One pydantic error as a person reads it (without the field's name)."""
    kind = str(error.get("type", ""))
    ctx = error.get("ctx") or {}
    given = error.get("input")
    simple = {
        "missing": "required",
        "extra_forbidden": "not a field this request takes",
        "int_parsing": f"{_shown(given)} is not a whole number",
        "int_type": f"{_shown(given)} is not a whole number",
        "int_from_float": f"{_shown(given)} is not a whole number",
        "float_parsing": f"{_shown(given)} is not a number",
        "float_type": f"{_shown(given)} is not a number",
        "finite_number": "must be a finite number",
        "bool_parsing": f"{_shown(given)} is not true or false",
        "bool_type": f"{_shown(given)} is not true or false",
        "string_type": "expected text",
        "list_type": "expected a list",
        "tuple_type": "expected a list",
        "set_type": "expected a list",
        "dict_type": "expected an object (key: value pairs)",
        "model_type": "expected an object (key: value pairs)",
        "model_attributes_type": "expected an object (key: value pairs)",
        "none_required": "must be null",
    }
    if kind in simple:
        return simple[kind]
    if kind == "greater_than_equal":
        limit = ctx.get("ge")
        return "cannot be negative" if limit == 0 else f"at least {bound(field, limit)}"
    if kind == "greater_than":
        limit = ctx.get("gt")
        return "must be above 0" if limit == 0 else f"must be above {bound(field, limit)}"
    if kind == "less_than_equal":
        return f"at most {bound(field, ctx.get('le'))}"
    if kind == "less_than":
        return f"must be below {bound(field, ctx.get('lt'))}"
    if kind == "multiple_of":
        return f"must be a multiple of {_number(ctx.get('multiple_of'))}"
    if kind == "string_too_short":
        n = ctx.get("min_length", 1)
        return "must not be empty" if n == 1 else f"at least {n} characters"
    if kind == "string_too_long":
        return f"at most {ctx.get('max_length')} characters ({len(str(given))} given)"
    if kind == "too_long":
        return f"at most {ctx.get('max_length')} items ({ctx.get('actual_length')} given)"
    if kind == "too_short":
        return f"at least {ctx.get('min_length')} items"
    if kind == "string_pattern_mismatch":
        rule = PATTERNS.get(str(ctx.get("pattern")), "not in the form this field takes")
        return f"{_shown(given)}: {rule}"
    if kind in ("literal_error", "enum"):
        return f"{_shown(given)} is not one of {_choices(str(ctx.get('expected', '')))}"
    if kind.startswith(("datetime", "date", "time", "timezone")):
        return f"{_shown(given)} is not an ISO 8601 time (2026-12-21T09:00+08:00)"
    if kind == "json_invalid":
        return f"the body is not valid JSON ({ctx.get('error', 'unreadable')})"
    if kind in ("value_error", "assertion_error"):  # our own validators' words
        message = str(error.get("msg", ""))
        return message.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    return _rephrased(str(error.get("msg", "invalid")))


def _rephrased(message: str) -> str:
    """An error this module does not know yet, without the validator's voice."""
    for words, instead in (("Input should be", "expected"), ("String should", "should"),
                           ("List should", "should")):  # fmt: skip
        message = message.replace(words, instead)
    return message
