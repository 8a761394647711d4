"""``gpupool bench cycle --server``: the leader's own cycle timed on a filled database. The
figures must describe the cycles they claim to: the cold cycle reads the whole queue and
every allocation the warm-up made, and the steady cycle sees exactly the changes made
between them."""

import json

from gpupool.bench.server_cycle import run_server_cycle_bench
from tests.support.cli import gpupool


def test_the_server_cycle_reads_the_filled_database_and_the_changes(database_url):
    out = run_server_cycle_bench(
        nodes=12, gpus_per_node=8, pending=300, tenants=5, database_url=database_url, changes=40
    )
    warm, cold, settle = out["warm_cycle"], out["cold_cycle"], out["settle_cycle"]
    steady = out["steady_cycle"]
    assert warm["admitted"] > 0 and warm["running"] == 0
    assert cold["pending"] == 300 and cold["running"] == warm["admitted"]
    assert cold["admitted"] > 0
    # preempted jobs suspend and wait again (on_preempt's default)
    assert settle["running"] == cold["running"] + cold["admitted"] - cold["preempted"]
    assert settle["pending"] == cold["pending"] - cold["admitted"] + cold["preempted"]
    ended, arrived = 20, 20
    assert steady["running"] == settle["running"] + settle["admitted"] - settle["preempted"] - ended
    assert (
        steady["pending"] == settle["pending"] - settle["admitted"] + settle["preempted"] + arrived
    )
    for cycle in (warm, cold, settle, steady):
        parts = cycle["snapshot_ms"] + cycle["decide_ms"] + cycle["commit_ms"]
        assert abs(parts - cycle["cycle_ms"]) < 1.0, cycle
        assert 0 < cycle["database_share"] < 1
    assert out["backend"] == ("sqlite" if database_url.startswith("sqlite") else "postgresql")
    assert out["database_size_mb"] > 0


def test_the_cli_runs_it_and_refuses_engine_only_options():
    done = gpupool(
        "bench", "cycle", "--server", "--nodes", "4", "--pending", "40", "--tenants", "2",
        "--changes", "4", "--json",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["steady_cycle"]["pending"] > 0
    mixed = gpupool("bench", "cycle", "--server", "--defrag-moves", "3")
    assert (
        mixed.returncode == 2
        and "--defrag-moves" in mixed.stderr
        and "not with --server" in mixed.stderr
    )
    alone = gpupool("bench", "cycle", "--database-url", "postgresql://x/y")
    assert alone.returncode == 2 and "only with --server" in alone.stderr
