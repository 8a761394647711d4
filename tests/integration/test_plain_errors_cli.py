"""Errors in the CLI's own terms (issue 59, finding 9): ``422 max_runtime_s: Input should be
less than or equal to 31622400`` for ``--time``, ``Input should be greater than or equal to 0``
for ``--nominal -3``, a regular expression for ``tenant create 研发部``. The server phrases
every 422 in the field's terms, the CLI names the option it sent the field as; a sweep over
every value-taking option of the client commands finds no validator wording."""

from typer.main import get_command

from gpupool.cli.main import app
from gpupool.plain_errors import PATTERNS, VALIDATOR_WORDS
from tests.support.cli import gpupool
from tests.support.cluster import ok, seed_cluster


def _env(server) -> dict[str, str]:
    return {"GPUPOOL_SERVER": server.url, "GPUPOOL_TOKEN": server.admin_token}


def test_a_422_names_the_option_in_its_own_terms(sqlite_server, tmp_path):
    seed_cluster(sqlite_server.admin(), nodes=1, cards=4, tenants={"algo": 4})
    env = _env(sqlite_server)
    cases = [
        (("job", "submit", "--tenant", "algo", "--time", "400-00:00:00", "--", "true"),
         "error: 422 --time: at most 366 days (31622400 s)"),
        (("job", "submit", "--tenant", "algo", "--max-runtime", "99999999", "--", "true"),
         "error: 422 --max-runtime: at most 366 days (31622400 s)"),
        (("quota", "set", "algo", "gpu", "--nominal", "-3"),
         "error: 422 --nominal: cannot be negative"),
        (("tenant", "create", "vision", "--weight", "0"),
         "error: 422 --weight: must be above 0"),
        (("billing", "report", "top-jobs", "--month", "2026-11", "--limit", "5000"),
         "error: 422 --limit: at most 1000"),
    ]  # fmt: skip
    for argv, said in cases:
        r = gpupool(*argv, env=env)
        assert (r.returncode, r.stderr.strip()) == (2, said), argv
    script = tmp_path / "long.sh"
    script.write_text("#!/bin/sh\n#SBATCH -t 400-00:00:00\n#SBATCH -A algo\necho hi\n")
    r = gpupool("sbatch", str(script), env=env)  # Slurm's own option
    assert (r.returncode, r.stderr.strip()) == (
        2,
        "error: 422 --time: at most 366 days (31622400 s)",
    )


SERVICE = ["chat", "--request", "gpu=1", "--target", "2", "--tenant", "algo", "--", "true"]
# client commands: what each needs besides the option tried (names that exist on the server)
NEEDS: dict[tuple[str, ...], list[str]] = {
    ("job", "submit"): ["--tenant", "algo", "--", "true"],
    ("job", "wait"): ["999999"],
    ("job", "show"): ["999999"],
    ("job", "logs"): ["999999"],
    ("alloc",): ["--tenant", "algo", "--time", "10", "--wait", "0"],
    ("notebook",): ["--tenant", "algo", "--time", "10", "--wait", "0"],
    ("quota", "set"): ["algo", "gpu"],
    ("quota", "delete"): ["nobody"],
    ("tenant", "create"): ["vision"],
    ("tenant", "show"): ["algo"],
    ("tenant", "limits"): ["algo"],
    ("tenant", "delete"): ["nobody"],
    ("user", "create"): ["ann", "--role", "member", "--tenant", "algo"],
    ("user", "disable"): ["nobody"],
    ("user", "enable"): ["nobody"],
    ("token", "create"): ["--user", "root"],
    ("token", "revoke"): ["999999"],
    ("node", "drain"): ["n0"],
    ("node", "resume"): ["n0"],
    ("node", "topology"): ["no-such-file.yaml"],
    ("node", "remove"): ["nobody"],
    ("node", "token", "revoke"): ["999999"],
    ("reservation", "create"): ["--tenant", "algo", "--nodes", "n0", "--end", "2h"],
    ("reservation", "delete"): ["999999"],
    ("pool", "set"): ["default"],
    ("billing", "quote"): ["--model", "A100-80G"],
    ("billing", "set-price"): ["T4", "--monthly", "800"],
    ("billing", "invoice"): ["--tenant", "algo", "--month", "2026-11"],
    ("billing", "report"): ["usage", "--month", "2026-11"],
    ("billing", "usage"): ["--month", "2026-11"],
    ("billing", "settings"): ["algo"],
    ("billing", "budget"): ["algo", "--monthly", "1000"],
    ("billing", "credit"): ["algo", "--month", "2026-11", "--amount", "5", "--reason", "x"],
    ("billing", "issue"): ["--month", "2020-01"],
    ("billing", "plan", "create"): ["--tenant", "algo", "--model", "A100-80G", "--cards", "1"],
    ("billing", "plan", "cancel"): ["999999"],
    ("service", "create"): SERVICE,
    ("service", "show"): ["chat"],
    ("service", "scale"): ["chat", "2"],
    ("service", "delete"): ["nobody"],
    ("service", "endpoints"): ["chat"],
    ("service", "forecast"): ["chat"],
    ("advisory", "set"): ["bind=off"],
    ("proposal", "approve"): ["999999"],
    ("proposal", "reject"): ["999999"],
}
NOT_CLIENT = {"server", "up", "agent", "devices", "join", "login", "admin", "kube", "bench",
              "simulate", "cert", "profile", "mig", "request", "policies", "version",
              "sbatch"}  # fmt: skip
WAITS = {("node", "remove", "--wait"), ("job", "wait", "--timeout")}  # they would wait
VALUES = ("-3", "0", "1000000000000000", "x" * 300, "研发 部", "2026-13", "1.5")


def _client_commands():
    def walk(command, path):
        if hasattr(command, "commands"):
            for name, sub in command.commands.items():
                yield from walk(sub, [*path, name])
        elif path[0] not in NOT_CLIENT:
            yield tuple(path), command

    yield from walk(get_command(app), [])


def test_no_option_of_any_client_command_answers_in_a_validators_words(sqlite_server, tmp_path):
    admin = sqlite_server.admin()
    seed_cluster(admin, nodes=1, cards=4, tenants={"algo": 4})
    env = _env(sqlite_server)
    ran, refused, named, leaks, unnamed = 0, 0, 0, [], set()
    for path, command in _client_commands():
        needs = NEEDS.get(path, [])
        for p in command.params:
            if p.param_type_name != "option" or p.is_flag or p.opts[0] in needs:
                continue
            if (*path, p.opts[0]) in WAITS or p.opts[0] == "--profile":
                continue
            for value in VALUES:
                r = gpupool(*path, p.opts[0], value, *needs, env=env, cwd=tmp_path)
                ran += 1
                said = r.stdout + r.stderr
                if "Traceback" in said or any(w in said for w in VALIDATOR_WORDS):
                    leaks.append((path, p.opts[0], value, said.strip()[-300:]))
                if r.stderr.startswith("error: 422 "):
                    refused += 1
                    head = r.stderr.removeprefix("error: 422 ").partition(": ")[0]
                    if p.opts[0] in head.split("/"):
                        named += 1
                    else:
                        unnamed.add((path, p.opts[0], head))
    print(f"{ran} runs, {refused} refused with 422, {named} of them naming the option tried")
    assert ran > 700 and refused > 250
    assert leaks == [], "\n".join(map(repr, leaks[:40]))
    # a 422 names the option the bad value came from, but for a rule of two options
    assert unnamed == {(("user", "create"), "--node", "role member")}, unnamed


def test_every_pattern_the_api_declares_is_said_in_words(sqlite_server):
    spec = ok(sqlite_server.admin().get("/openapi.json"))
    found: set[str] = set()

    def walk(node):
        if isinstance(node, dict):
            if isinstance(node.get("pattern"), str):
                found.add(node["pattern"])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(spec)
    assert found and found <= set(PATTERNS), found - set(PATTERNS)
