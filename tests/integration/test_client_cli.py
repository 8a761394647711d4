"""The CLI client against a live server: login, jobs, nodes, queue, tenants, quotas; clear
errors (connection refused, 401, 403, 422) with exit code 2 and no traceback."""

import json
import stat

from gpupool.server.process import free_port
from tests.support.cli import gpupool
from tests.support.cluster import seed_cluster


def test_cli_round_trip(sqlite_server, tmp_path):
    seed_cluster(sqlite_server.admin(), nodes=1, tenants={"algo": 2})
    env = {"GPUPOOL_CONFIG_DIR": str(tmp_path / "cfg")}
    r = gpupool(
        "login", "--server", sqlite_server.url, "--token", sqlite_server.admin_token, env=env
    )
    assert r.returncode == 0, r.stderr
    saved = tmp_path / "cfg" / "client.json"
    assert stat.S_IMODE(saved.stat().st_mode) == 0o600
    r = gpupool(
        "job",
        "submit",
        "--tenant",
        "algo",
        "--gpu",
        "1",
        "--cpu",
        "2",
        "--name",
        "train",
        "--key",
        "once",
        "--json",
        "--",
        "python",
        "-c",
        "print(1)",
        env=env,
    )
    assert r.returncode == 0, r.stderr
    job = json.loads(r.stdout)
    assert job["command"] == ["python", "-c", "print(1)"] and job["request"] == "gpu=1,cpu=2000m"
    again = gpupool(
        "job",
        "submit",
        "--tenant",
        "algo",
        "--gpu",
        "1",
        "--cpu",
        "2",
        "--name",
        "train",
        "--key",
        "once",
        "--json",
        "--",
        "python",
        "-c",
        "print(1)",
        env=env,
    )
    assert json.loads(again.stdout)["id"] == job["id"]
    sqlite_server.cycle()
    listed = json.loads(gpupool("job", "list", "--json", env=env).stdout)
    assert [j["state"] for j in listed["items"]] == ["admitted"]
    assert "admitted" in gpupool("job", "show", str(job["id"]), env=env).stdout
    big = json.loads(
        gpupool("job", "submit", "--tenant", "algo", "--gpu", "4", "--json", "--", "true",
                env=env).stdout
    )  # fmt: skip
    sqlite_server.cycle()
    queue = json.loads(gpupool("queue", "--state", "pending", "--json", env=env).stdout)
    assert [q["id"] for q in queue] == [big["id"]] and queue[0]["where"]  # its reason
    never = gpupool("job", "submit", "--tenant", "algo", "--gpu", "8", env=env)
    assert never.returncode == 2 and "can never run on this pool" in never.stderr
    nodes = json.loads(gpupool("nodes", "--json", env=env).stdout)
    assert [n["node"] for n in nodes] == ["n0"] and nodes[0]["cards"] == 4
    r = gpupool("quota", "set", "algo", "gpu", "--nominal", "3", "--borrowing-limit", "1", env=env)
    assert r.returncode == 0, r.stderr
    tenants = json.loads(gpupool("tenants", "--json", env=env).stdout)["items"]
    q = tenants[0]["quotas"][0]
    assert (q["nominal"], q["borrowing_limit"], q["used"]) == (3.0, 1.0, 1.0)
    assert "cancelled" in gpupool("job", "cancel", str(job["id"]), env=env).stdout
    assert "algo" in gpupool("tenants", env=env).stdout  # the table form renders


def test_cli_errors_are_one_line_exit_2(sqlite_server, tmp_path):
    seed_cluster(sqlite_server.admin(), nodes=1, tenants={"algo": 2})
    viewer = sqlite_server.token("vic", "viewer", "algo")
    base = {"GPUPOOL_CONFIG_DIR": str(tmp_path / "none"), "GPUPOOL_SERVER": sqlite_server.url}
    cases = [
        ({"GPUPOOL_SERVER": f"http://127.0.0.1:{free_port()}"}, ["nodes"], "cannot reach"),
        ({"GPUPOOL_TOKEN": "gp_wrong"}, ["job", "list"], "401"),
        ({"GPUPOOL_TOKEN": viewer}, ["job", "submit", "--gpu", "1"], "403"),
        (
            {"GPUPOOL_TOKEN": sqlite_server.admin_token},
            ["job", "submit", "--tenant", "algo", "--request", "gpu=1", "--kind", "party"],
            "422",
        ),
        ({"GPUPOOL_TOKEN": sqlite_server.admin_token}, ["job", "submit", "--gpu", "two"], "gpu"),
        ({"GPUPOOL_TOKEN": sqlite_server.admin_token}, ["job", "cancel", "99"], "404"),
    ]
    for extra, args, expected in cases:
        r = gpupool(*args, env={**base, **extra})
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert expected in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)


def test_admin_token_create_prints_the_token_last(tmp_path):
    r = gpupool("admin", "token", "create", "--name", "ops", "--data-dir", str(tmp_path))
    assert r.returncode == 0, r.stderr
    token = r.stdout.split()[-1]
    assert token.startswith("gp_") and len(token) > 40
    r = gpupool(
        "admin", "token", "create", "--name", "m", "--role", "member", "--data-dir", str(tmp_path)
    )
    assert r.returncode == 2 and "tenant is required" in r.stderr
    r = gpupool(
        "admin", "token", "create", "--name", "m", "--role", "boss", "--data-dir", str(tmp_path)
    )
    assert r.returncode == 2 and "role" in r.stderr and "Traceback" not in r.stderr
    r = gpupool("server", "--data-dir", str(tmp_path), "--policy", "nonsense")
    assert r.returncode == 2 and "policy" in r.stderr and "Traceback" not in r.stderr
    r = gpupool("server", "--config", str(tmp_path / "missing.toml"))
    assert r.returncode == 2 and "missing.toml" in r.stderr


def test_profiles_pick_a_server_like_kubectl_contexts(sqlite_server, tmp_path):
    env = {"GPUPOOL_CONFIG_DIR": str(tmp_path / "cfg")}
    # a file written before profiles still works, as the profile "default"
    (tmp_path / "cfg").mkdir()
    old = {"server": "http://127.0.0.1:9", "token": "gp_old"}
    (tmp_path / "cfg" / "client.json").write_text(json.dumps(old))
    r = gpupool("profile", "list", "--json", env=env)
    assert json.loads(r.stdout) == [{"current": "*", "name": "default", "server": old["server"]}]
    r = gpupool("login", "--server", sqlite_server.url, "--token", sqlite_server.admin_token,
                "--profile", "lab", env=env)  # fmt: skip
    assert r.returncode == 0 and "as root" in r.stdout and "profile lab" in r.stdout
    assert gpupool("whoami", env=env).stdout.startswith("root (admin, tenant -) at http://")
    # an explicit profile wins over the current one, and over GPUPOOL_SERVER
    r = gpupool("--profile", "default", "whoami", env={**env, "GPUPOOL_SERVER": sqlite_server.url})
    assert r.returncode == 2 and "cannot reach the gpupool server at http://127.0.0.1:9" in r.stderr
    r = gpupool("whoami", env={**env, "GPUPOOL_PROFILE": "nope"})
    assert r.returncode == 2 and "no profile 'nope' (known: default, lab)" in r.stderr
    assert gpupool("profile", "use", "default", env=env).returncode == 0
    assert gpupool("whoami", env=env).returncode == 2  # the old server is not there
    r = gpupool("whoami", env={**env, "GPUPOOL_SERVER": sqlite_server.url,
                               "GPUPOOL_TOKEN": sqlite_server.admin_token})  # fmt: skip
    assert r.returncode == 0  # the environment wins over the current profile
    assert gpupool("profile", "delete", "default", env=env).returncode == 0
    listed = json.loads(gpupool("profile", "list", "--json", env=env).stdout)
    assert listed == [{"current": "", "name": "lab", "server": sqlite_server.url}]
    assert stat.S_IMODE((tmp_path / "cfg" / "client.json").stat().st_mode) == 0o600
    assert sqlite_server.admin_token not in gpupool("profile", "list", env=env).stdout


def test_login_says_what_is_wrong_with_the_url_or_the_kind_of_token(sqlite_server, tmp_path):
    env = {"GPUPOOL_CONFIG_DIR": str(tmp_path / "cfg")}
    bare = sqlite_server.url.removeprefix("http://")
    r = gpupool("login", "--server", bare, "--token", sqlite_server.admin_token, env=env)
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert f"server '{bare}' has no scheme: did you mean http://{bare}?" in r.stderr
    r = gpupool("login", "--server", "ftp://x", "--token", "t", env=env)
    assert r.returncode == 2 and "expected http://HOST:PORT or https://HOST:PORT" in r.stderr
    agent = sqlite_server.token("agent-n1", "agent", node="n1")
    r = gpupool("login", "--server", sqlite_server.url, "--token", agent, env=env)
    assert r.returncode == 2, r.stdout  # it once said "logged in" and saved it
    assert "this token is for gpupool agent on a node (role agent), not a person's" in r.stderr
    assert not (tmp_path / "cfg" / "client.json").exists()
    r = gpupool("whoami", env={**env, "GPUPOOL_SERVER": bare, "GPUPOOL_TOKEN": "t"})
    assert r.returncode == 2 and "has no scheme" in r.stderr and "Traceback" not in r.stderr


def test_a_profiles_ca_is_trusted_for_its_own_server_only(tmp_path, monkeypatch):
    """A profile keeps the CA it logged in with (issue 59, finding 7), and it vouches for
    that profile's server only: GPUPOOL_SERVER naming another does not inherit it."""
    from gpupool.client import profiles

    monkeypatch.setenv("GPUPOOL_CONFIG_DIR", str(tmp_path / "cfg"))
    for name in ("GPUPOOL_SERVER", "GPUPOOL_TOKEN", "GPUPOOL_PROFILE", "GPUPOOL_CA"):
        monkeypatch.delenv(name, raising=False)
    profiles.save("lab", "https://a.example:8080", "gp_t", ca="PEM OF A")
    profiles.save("plain", "http://127.0.0.1:8080", "gp_u")
    assert profiles.ca_for("http://127.0.0.1:8080") is None
    profiles.use("lab")
    server, _ = profiles.credentials()
    assert profiles.ca_for(server) == "PEM OF A"
    monkeypatch.setenv("GPUPOOL_SERVER", "https://b.example:8080")
    server, _ = profiles.credentials()
    assert server == "https://b.example:8080" and profiles.ca_for(server) is None
    monkeypatch.setenv("GPUPOOL_PROFILE", "lab")  # a profile chosen for the command wins
    server, _ = profiles.credentials()
    assert profiles.ca_for(server) == "PEM OF A"
