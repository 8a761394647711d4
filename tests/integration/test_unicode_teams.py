"""Team names in the team's own language (issue 59, finding 9): ``tenant create 研发部``
answered a regular expression. A team name is letters of any script, digits 0-9, '.', '_'
and '-', starting with a letter or digit, as written (no full-width twin of an ASCII name);
it then goes everywhere a name goes — URLs, invoices and their file names, Prometheus labels,
a node's Unix user (``gp-<hash>``), cgroup folder and network namespace."""

import json

from gpupool.agent.cgroups import Cgroups
from gpupool.agent.identity import MAX_USER_NAME, unix_name
from tests.support.cli import gpupool
from tests.support.cluster import ok, seed_cluster, started, submit

TEAM = "研发部"


def _env(server) -> dict[str, str]:
    return {"GPUPOOL_SERVER": server.url, "GPUPOOL_TOKEN": server.admin_token}


def test_a_chinese_team_name_goes_where_a_name_goes(sqlite_server, tmp_path):
    admin = sqlite_server.admin()
    seed_cluster(admin, nodes=1, cards=4, tenants={})
    env = _env(sqlite_server)
    r = gpupool("tenant", "create", "研发中心", env=env)
    assert (r.returncode, r.stdout.strip()) == (0, "tenant 研发中心 created"), r.stderr
    r = gpupool("tenant", "create", TEAM, "--parent", "研发中心", env=env)
    assert (r.returncode, r.stdout.strip()) == (0, f"tenant {TEAM} created under 研发中心")
    assert gpupool("quota", "set", TEAM, "gpu", "--nominal", "2", env=env).returncode == 0
    assert gpupool("user", "create", "li", "--role", "member", "--tenant", TEAM,
                   env=env).returncode == 0  # fmt: skip
    show = json.loads(gpupool("tenant", "show", TEAM, "--json", env=env).stdout)
    assert show["name"] == TEAM and show["parent"] == "研发中心"
    job = submit(admin, "gpu=1", TEAM)
    sqlite_server.cycle()
    started(admin, job)
    ok(admin.post(f"/api/v1/jobs/{job['id']}/cancel"))
    month = gpupool("usage", "--json", env=env)
    assert TEAM in {i["tenant"] for i in json.loads(month.stdout)["items"]}
    # its invoice, by URL and as files named after it
    pdf = admin.get("/api/v1/billing/invoice", params={"tenant": TEAM, "month": "2026-12",
                                                        "format": "pdf", "lang": "en"})  # fmt: skip
    assert pdf.status_code in (200, 503), pdf.text  # 503: no PDF library on this machine
    if pdf.status_code == 200:
        assert "filename*=UTF-8''" in pdf.headers["content-disposition"]
    out = tmp_path / "invoices"
    r = gpupool("billing", "issue", "--month", "2026-12", "--out", str(out), "--lang", "en",
                env=env)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert any(TEAM in p.name for p in out.iterdir()), list(out.iterdir())
    # a Prometheus label
    metrics = admin.get("/metrics").text
    assert f'tenant="{TEAM}"' in metrics


def test_team_names_that_are_not_names_are_refused_saying_why(sqlite_server):
    seed_cluster(sqlite_server.admin(), nodes=1, cards=4, tenants={})
    env = _env(sqlite_server)
    for name, why in (
        ("研发 部", "' ' is not one of them"),
        ("ＡＢＣ", "write it as 'ABC'"),
        ("_研发", "starting with a letter or digit"),
        ("研发/部", "'/' is not one of them"),
    ):
        r = gpupool("tenant", "create", name, env=env)
        assert r.returncode == 2 and why in r.stderr, (name, r.stderr)
        assert r.stderr.startswith("error: 422 name: "), r.stderr
        assert "Input should" not in r.stderr and "match pattern" not in r.stderr


def test_a_chinese_team_name_on_a_node():
    """Its Unix user is gp- and a hash (user names are ASCII), distinct per team; its cgroup
    folder and network namespace are hashed names too."""
    names = {unix_name("gp-", t) for t in (TEAM, "研发中心", "研发", "Team.A", "team-a")}
    assert len(names) == 5
    user = unix_name("gp-", TEAM)
    assert user.startswith("gp-") and len(user) <= MAX_USER_NAME and user.isascii()
    assert "--" not in user and user.replace("-", "").isalnum()
    assert unix_name("gp-", "vision研发").startswith("gp-vision-")
    assert unix_name("gp-", "algorithm") == "gp-algorithm"  # ASCII names keep theirs
    folder = Cgroups.tenant_folder(Cgroups.__new__(Cgroups), TEAM)
    assert folder.isascii() and folder.startswith("tenant-")
