"""The unit tier stays pure: a test here that starts a process, opens a connection or a
database fails, naming the tier it belongs in (tests/support/tiers.py)."""

import socket
import sqlite3
import subprocess

import pytest


@pytest.mark.parametrize(
    "impure",
    [
        lambda: subprocess.run(["true"], check=False),
        lambda: socket.create_connection(("127.0.0.1", 9), timeout=1),
        lambda: sqlite3.connect(":memory:"),
    ],
    ids=["process", "connection", "database"],
)
def test_a_unit_test_that_reaches_outside_fails(impure):
    with pytest.raises(RuntimeError, match="it belongs in integration"):
        impure()


def test_every_test_is_marked_with_its_folders_tier(request):
    assert request.node.get_closest_marker("unit") is not None
