"""``gpupool bench season --small --json`` (issue 61) as CI runs it: a real server and agent
processes under the compressed trace and the fault schedule; every invariant must hold, and
the season must really have done what it says (faults applied, messages sent twice, jobs owed
their cards), so a scorecard that checked nothing cannot pass."""

import json
import subprocess
import sys


def test_the_small_season_holds_every_invariant(tmp_path):
    cmd = [sys.executable, "-m", "gpupool.cli.main", "bench", "season", "--small", "--json"]
    done = subprocess.run(
        [*cmd, "--keep", str(tmp_path / "season")], capture_output=True, text=True, timeout=900
    )
    assert done.stdout, done.stderr[-3000:]
    card = json.loads(done.stdout)
    broken = {k: v["detail"] for k, v in card["invariants"].items() if not v["held"]}
    assert not broken, f"{broken} (records and logs in {tmp_path / 'season'})"
    assert done.returncode == 0, done.stderr[-3000:]
    assert set(card["invariants"]) == {
        "nothing_lost_nothing_twice",
        "billing_equals_run_time",
        "guarantee_served_within_bound",
    }
    assert [f["kind"] for f in card["faults"]] == [
        "server kill -9, restarted",
        "agent process kill -9, restarted 2 s later",
    ]
    assert card["submissions"]["acknowledged"] == card["trace"]["jobs"]
    assert card["submissions"]["sent_twice"] > 0
    lost = card["invariants"]["nothing_lost_nothing_twice"]
    assert lost["unfinished"] == 0 and lost["runs"] >= card["trace"]["jobs"]
    assert lost["runs_without_cards"] == 0  # every run named its cards: they were checked
    assert card["invariants"]["guarantee_served_within_bound"]["owed"] > 0
    billed = card["invariants"]["billing_equals_run_time"]["teams"]
    assert set(billed) == {"training", "serving", "research"}
