"""The orders an agent acts on are validated into one typed model shared with the server:
a renamed or missing field fails by name before anything starts; what an older server did not
send reads as it meant; what a newer one adds is ignored."""

import pytest

from gpupool.model.protocol import OrdersOut, OrdersUnreadable, read_orders

DEVICE = {"device": 0, "compute_pct": 100, "mem_mib": 81920, "exclusive": True,
          "mig_profile": None, "mig_start": None}  # fmt: skip
ORDER = {
    "id": 7, "job_id": 3, "tenant": "algo", "generation": 2, "state": "active",
    "borrowed": False, "action": "allocate", "after": [], "created_at": 0.0,
    "released_at": None, "release_reason": "", "job_name": "train", "job_state": "admitted",
    "on_lost": "requeue", "command": ["true"], "env": {}, "image": None, "max_runtime_s": None,
    "nodes": [{"node": "n1", "cpu_millis": 1000, "mem_mib": 1024, "devices": [DEVICE]}],
}  # fmt: skip


def answer(**order: object) -> dict:
    return {"generation": 2, "node_state": "ready", "orders": [{**ORDER, **order}]}


def test_an_answer_reads_into_typed_orders():
    orders = read_orders(answer())
    assert isinstance(orders, OrdersOut) and orders.restore_epoch == "" and orders.modes == {}
    (order,) = orders.orders
    assert order.nodes[0].devices[0].mem_mib == 81920 and order.replica is False


def test_an_older_server_that_does_not_say_where_a_part_started_reads_as_none():
    assert read_orders(answer()).orders[0].started_here is None
    assert read_orders(answer(started_here=True)).orders[0].started_here is True


def test_what_a_newer_server_adds_is_ignored():
    assert read_orders({**answer(future="x"), "also": 1}).orders[0].id == 7


@pytest.mark.parametrize(
    ("payload", "named"),
    [
        ({"generation": 2, "node_state": "ready"}, "orders"),
        (answer(job_id="three"), "orders.0.job_id"),
        ({**answer(), "modes": {"0": "fast"}}, "modes.0"),
        ("<html>a proxy's page</html>", "the answer"),
    ],
)
def test_an_answer_that_is_not_orders_is_refused_naming_the_field(payload, named):
    with pytest.raises(OrdersUnreadable, match=f"do not read: {named}:"):
        read_orders(payload)
