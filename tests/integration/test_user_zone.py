"""Every time a user reads in the CLI is in their zone with its offset (issue 59, finding 8):
``set-price --from 2027-02-01T00:00`` under Asia/Shanghai echoed ``2027-01-31T16:00:00Z``,
server errors and pending reasons printed UTC, and ``usage --month`` (the machine's zone) and
``billing … --month`` (Asia/Shanghai) covered different hours of one month on a UTC host.
The API stays machine-readable (epoch seconds, ISO with Z): the CLI renders at the edge."""

import json
import re
import time

from gpupool.billing.invoice import month_bounds
from tests.support.cli import gpupool
from tests.support.cluster import ok, seed_cluster, submit

UTC_STAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?Z")


def _env(server, zone: str) -> dict[str, str]:
    return {"GPUPOOL_SERVER": server.url, "GPUPOOL_TOKEN": server.admin_token, "TZ": zone}


def test_a_price_from_a_local_time_is_echoed_in_that_zone(sqlite_server):
    env = _env(sqlite_server, "Asia/Shanghai")
    r = gpupool("billing", "set-price", "T4", "--monthly", "800", "--from", "2027-02-01T00:00",
                env=env)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == (
        "T4: ¥800.00 a card-month (¥1.111111 an hour) from 2027-02-01 00:00 +08:00"
    )
    raw = gpupool("billing", "prices", "--json", env=env)
    assert {"model": "T4", "effective_from": "2027-01-31T16:00:00Z"}.items() <= next(
        p for p in json.loads(raw.stdout) if p["model"] == "T4" and p["source"] == "set"
    ).items()  # the API keeps UTC
    table = gpupool("billing", "prices", env=env).stdout
    assert "2027-02-01 00:00" in table and "UTC+08:00" in table and not UTC_STAMP.search(table)


def test_rental_plans_print_their_times_in_the_users_zone(sqlite_server):
    admin = sqlite_server.admin()
    seed_cluster(admin, nodes=1, cards=4, tenants={"algo": 1})
    env = _env(sqlite_server, "Asia/Shanghai")
    plan = ("--model", "A100-80G", "--cards", "1", "--plan", "daily")
    r = gpupool("billing", "plan", "create", "--tenant", "algo", *plan, "--start",
                "2027-03-01T00:00", env=env)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "from 2027-03-01 00:00 +08:00 to 2027-03-02 00:00 +08:00" in r.stdout, r.stdout
    listing = gpupool("billing", "plan", "list", env=env).stdout
    assert "2027-03-01" in listing and "2027-02-28" not in listing  # the day in the user's zone
    r = gpupool("billing", "plan", "cancel", "1", env=env)
    assert r.returncode == 0 and not UTC_STAMP.search(r.stdout) and "+08:00" in r.stdout


def test_server_errors_and_pending_reasons_read_in_the_users_zone(sqlite_server):
    admin = sqlite_server.admin()
    seed_cluster(admin, nodes=1, cards=4, tenants={"algo": 4, "dev": 4})
    env = _env(sqlite_server, "Asia/Shanghai")
    r = gpupool("reservation", "create", "--tenant", "algo", "--nodes", "n0", "--start", "now",
                "--end", "1d", env=env)  # fmt: skip
    assert r.returncode == 0, r.stderr
    r = gpupool("reservation", "create", "--tenant", "dev", "--nodes", "n0", "--start", "2h",
                "--end", "3h", env=env)  # fmt: skip
    assert r.returncode == 2 and "+08:00" in r.stderr, r.stderr
    assert not UTC_STAMP.search(r.stderr), r.stderr  # the server said it in UTC
    job = submit(admin, "gpu=1", "dev")  # waits for the reservation's end
    sqlite_server.cycle()
    reason = ok(admin.get(f"/api/v1/jobs/{job['id']}"))["reason"]
    assert UTC_STAMP.search(reason), reason  # the API keeps UTC
    for argv in (("queue", "-l"), ("job", "show", str(job["id"])), ("job", "list", "-o", "reason")):
        out = gpupool(*argv, env=env)
        assert out.returncode == 0, out.stderr
        assert "+08:00" in out.stdout and not UTC_STAMP.search(out.stdout), (argv, out.stdout)


def test_usage_and_billing_months_are_the_same_hours_on_a_utc_host(sqlite_server):
    """One rule for a month, whichever command: the billing zone (the server's
    ``billing_zone``, Asia/Shanghai unless set), unless ``--zone`` names another."""
    seed_cluster(sqlite_server.admin(), nodes=1, cards=4, tenants={"algo": 4})
    env = _env(sqlite_server, "UTC")
    month = time.strftime("%Y-%m")
    start, end = month_bounds(month, "Asia/Shanghai")
    usage = json.loads(gpupool("usage", "--month", month, "--json", env=env).stdout)
    assert (usage["since"], usage["until"], usage["zone"]) == (start, end, "Asia/Shanghai")
    r = gpupool("usage", "--month", month, env=env)
    assert f"{month} in Asia/Shanghai" in r.stdout and "+00:00" in r.stdout, r.stdout
    for argv in (("billing", "report", "usage"), ("billing", "usage")):
        out = gpupool(*argv, "--month", month, env=env)
        assert out.returncode == 0 and "(Asia/Shanghai" in out.stdout, (argv, out.stdout)
    utc = json.loads(gpupool("usage", "--month", month, "--zone", "UTC", "--json", env=env).stdout)
    assert (utc["since"], utc["until"]) == month_bounds(month, "UTC")
    assert json.loads(gpupool("billing", "report", "usage", "--month", month, "--zone", "UTC",
                              "--json", env=env).stdout) == []  # fmt: skip
