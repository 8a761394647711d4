"""Slurm's points in time (``sbatch --begin``), read as Slurm's ``parse_time`` reads them, in
the submitting machine's zone (as sbatch reads them on the submit host). Pure but for the
zone, which comes from the ``now`` the caller gives (``datetime.astimezone``).

Formats: ``now[+-]N[seconds|minutes|hours|days|weeks]`` (seconds without a unit), ``HH:MM[:SS]
[AM|PM]`` (today, or tomorrow once past), ``YYYY-MM-DD[THH:MM[:SS]]``, ``MM/DD[/YY]``,
``MMDD[YY]``, ``MM.DD[.YY]`` (this year, or next once past) with ``-HH:MM[:SS]`` after them,
``today``, ``tomorrow``, ``midnight``, ``noon``, ``elevenses`` (11:00), ``fika`` (15:00),
``teatime`` (16:00), and ``uts`` followed by epoch seconds."""

import re
from datetime import date, datetime, timedelta

from gpupool.model.errors import SpecError

UNITS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400, "week": 604800}
NAMED = {"midnight": (0, 0), "noon": (12, 0), "elevenses": (11, 0), "fika": (15, 0),
         "teatime": (16, 0)}  # fmt: skip
_NOW = re.compile(r"^now\s*(?:([+-])\s*(\d+)\s*([a-z]*))?$")
_CLOCK = re.compile(r"^(\d{1,2}):(\d{2})(?::(\d{2}))?\s*(am|pm)?$")
_ISO = re.compile(r"^(\d{4})-(\d{1,2})-(\d{1,2})(?:t(.+))?$")
_DAY = re.compile(r"^(\d{1,2})([/.]?)(\d{1,2})(?:\2(\d{2}))?(?:-(.+))?$")


def parse_begin(text: str, now: float) -> float:
    """``text`` as epoch seconds; a format Slurm would not read is refused naming it."""
    words = text.strip().lower()
    here = datetime.fromtimestamp(now).astimezone()
    try:
        found = _parse(words, here)
    except ValueError:  # a day or hour out of range
        found = None
    if found is None:
        raise SpecError(
            f"begin: {text!r} is not a time sbatch reads (now+1hour, 16:00, 2026-12-24T08:00, "
            "12/24, tomorrow, midnight, ...)",
            field="begin",
        )
    return found


def _parse(words: str, here: datetime) -> float | None:
    if words.startswith("uts") and words[3:].isdigit():
        return float(words[3:])
    m = _NOW.match(words)
    if m:
        if m[1] is None:
            return here.timestamp()
        unit = m[3].removesuffix("s") if m[3] else "second"
        if unit not in UNITS:
            return None
        delta = int(m[2]) * UNITS[unit]
        return here.timestamp() + (delta if m[1] == "+" else -delta)
    day: date | None = None
    clock: tuple[int, int, int] | None = None
    for word in re.split(r"\s+", words):
        if word in ("today", "tomorrow"):
            day = here.date() + timedelta(days=1 if word == "tomorrow" else 0)
        elif word in NAMED:
            clock = (*NAMED[word], 0)
        elif (parsed := _date_time(word, here)) is not None:
            given_day, given_clock = parsed
            day = given_day or day
            clock = given_clock or clock
        else:
            return None
    return _when(here, day, clock)


def _date_time(word: str, here: datetime) -> tuple[date | None, tuple[int, int, int] | None] | None:
    c = _CLOCK.match(word)
    if c:
        return None, _clock(c)
    m = _ISO.match(word)
    if m:
        clock = None
        if m[4] is not None:
            c = _CLOCK.match(m[4])
            if c is None:
                return None
            clock = _clock(c)
        return date(int(m[1]), int(m[2]), int(m[3])), clock
    m = _DAY.match(word)
    if m:
        clock = None
        if m[5] is not None:
            c = _CLOCK.match(m[5])
            if c is None:
                return None
            clock = _clock(c)
        month, mday = int(m[1]), int(m[3])
        if m[4] is not None:
            return date(2000 + int(m[4]), month, mday), clock
        this_year = date(here.year, month, mday)
        if (this_year, clock or (0, 0, 0)) <= (here.date(), _hms(here)):
            return date(here.year + 1, month, mday), clock  # past: next year's, as Slurm
        return this_year, clock
    return None


def _clock(c: re.Match[str]) -> tuple[int, int, int]:
    hour, minute, second = int(c[1]), int(c[2]), int(c[3] or 0)
    if c[4] == "pm" and hour < 12:
        hour += 12
    elif c[4] == "am" and hour == 12:
        hour = 0
    if hour > 23 or minute > 59 or second > 59:
        raise ValueError("out of range")
    return hour, minute, second


def _hms(t: datetime) -> tuple[int, int, int]:
    return t.hour, t.minute, t.second


def _when(here: datetime, day: date | None, clock: tuple[int, int, int] | None) -> float | None:
    if day is None and clock is None:
        return None
    if day is None:  # a time alone: the soonest such moment, today or tomorrow
        assert clock is not None
        day = here.date() if clock > _hms(here) else here.date() + timedelta(days=1)
    hour, minute, second = clock or (0, 0, 0)
    moment = datetime(day.year, day.month, day.day, hour, minute, second, tzinfo=here.tzinfo)
    return moment.timestamp()
