"""The suite's three tiers, one folder each, marked by where a test lives:

- ``unit``: pure logic, milliseconds — no process, socket or database (a test that tries one
  fails, so the tier stays what it says);
- ``integration``: a database, one live server in this process, agents in threads;
- ``e2e``: real processes, the Kubernetes API server, a browser, Prometheus, network namespaces.

``pytest -m unit`` (or ``pytest tests/unit``) runs the fast tier alone."""

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

TIERS = ("unit", "integration", "e2e")
IMPURE = {
    "subprocess.Popen": "starts a process",
    "os.posix_spawn": "starts a process",
    "os.fork": "forks",
    "socket.connect": "opens a connection",
    "socket.bind": "binds a socket",
    "sqlite3.connect": "opens a database",
}
_in_unit = False


def _guard(event: str, args: tuple[object, ...]) -> None:
    if _in_unit and event in IMPURE:
        raise RuntimeError(f"a unit test {IMPURE[event]} ({event}): it belongs in integration")


sys.addaudithook(_guard)


def tier_of(path: Path) -> str | None:
    return next((part for part in reversed(path.parts) if part in TIERS), None)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        tier = tier_of(item.path)
        if tier is None:
            raise pytest.UsageError(f"{item.path}: a test lives in tests/{{{','.join(TIERS)}}}/")
        item.add_marker(tier)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    global _in_unit
    _in_unit = tier_of(item.path) == "unit"
    try:
        return (yield)
    finally:
        _in_unit = False
