"""The openb trace replayed in time: exact delays and utilisation on a hand-sized cluster,
fractional shares against whole cards, bad rows and bad options."""

import json

import pytest

from gpupool.model import SpecError
from gpupool.sim.openb_time import compare_in_time, replay_in_time, sample_nodes
from gpupool.sim.traces.openb import load_nodes, load_pods
from tests.support.builders import OPENB_SMALL, openb_trace
from tests.support.cli import gpupool


def test_fractional_shares_run_together_whole_cards_queue(tmp_path):
    n, p = openb_trace(tmp_path, OPENB_SMALL)
    nodes, pods = load_nodes(n)[0], load_pods(p)[0]
    frac = replay_in_time(nodes, pods, "best-fit", "fractional", horizon_s=200, sample_s=50)
    assert (frac.started, frac.never_started) == (3, 0)
    # a and b share the card 0-100; c waits until 100 and runs 100-150
    assert frac.queue_delay_p95_s == pytest.approx(81.0)  # of delays [0, 0, 90]
    assert frac.useful_util_mean == pytest.approx(0.75)
    assert frac.alloc_ratio_mean == pytest.approx(0.75)
    assert [s[1] for s in frac.series] == [1.0, 1.0, 1.0, 0.0, 0.0]

    whole = replay_in_time(nodes, pods, "best-fit", "whole-cards", horizon_s=200, sample_s=50)
    # a holds the whole card 0-100, b 100-200 (FIFO before c), c starts at 200
    assert whole.queue_delay_p50_s == pytest.approx(100.0)  # of delays [0, 100, 190]
    assert whole.alloc_ratio_mean == pytest.approx(1.0)
    assert whole.useful_util_mean == pytest.approx(0.5)  # a half-GPU pod on a whole card
    assert whole.alloc_ratio_while_queued == pytest.approx(1.0)
    assert whole.useful_util_while_queued == pytest.approx(0.5)
    assert [s[3] for s in whole.series] == [1, 2, 1, 1, 0]  # pods waiting (b, then b and c)


def test_backfill_lets_a_small_pod_pass_a_big_one(tmp_path):
    rows = (
        "big,1000,1024,2,1000,,LS,Running,0,100,0\n"  # needs both cards; one is busy
        "small,1000,1024,1,1000,,LS,Running,1,11,1\n"
    )
    n, p = openb_trace(
        tmp_path,
        "hold,1000,1024,1,1000,,LS,Running,0,50,0\n" + rows,
        nodes="n1,32000,262144,2,G2\n",
    )
    r = replay_in_time(load_nodes(n)[0], load_pods(p)[0], "best-fit", "fractional", 100)
    # hold runs 0-50; big waits until 50; small fits the free card at 1 without waiting
    assert r.started == 3 and r.queue_delay_p50_s == pytest.approx(0.0)
    assert r.queue_delay_p95_s == pytest.approx(45.0)  # of delays [0, 50, 0]


def test_times_in_the_loader_and_their_bad_rows(tmp_path):
    _, p = openb_trace(
        tmp_path,
        "ok,1000,1024,1,500,,LS,Running,5,100,20\n"
        "early,1000,1024,1,500,,LS,Running,5,10,20\n"
        "junk,1000,1024,1,500,,LS,Running,x,10,20\n",
    )
    pods, errors = load_pods(p)
    assert [(q.created_s, q.run_s) for q in pods] == [(5, 80)]
    assert [e.line for e in errors] == [3, 4]
    assert "deletion_time=10 is before the pod started (20)" in errors[0].message
    assert "creation_time='x' is not an integer" in errors[1].message


def test_a_trace_without_times_is_refused_clearly(tmp_path):
    p = tmp_path / "pods.csv"
    p.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec\na,1000,1024,1,500,\n")
    n, _ = openb_trace(tmp_path, "")
    with pytest.raises(SpecError, match="no pod has creation and deletion times"):
        compare_in_time(load_nodes(n)[0], load_pods(p)[0], ["best-fit"])


def test_sample_nodes_keeps_the_mix(tmp_path):
    nodes_csv = "".join(f"a{i},32000,262144,8,G2\n" for i in range(40))
    nodes_csv += "".join(f"b{i},32000,262144,2,T4\n" for i in range(10))
    n, _ = openb_trace(tmp_path, "", nodes=nodes_csv)
    nodes = load_nodes(n)[0]
    half = sample_nodes(nodes, 0.5)
    assert sorted(len(x.devices) for x in half).count(8) == 20
    assert sorted(len(x.devices) for x in half).count(2) == 5
    assert len(sample_nodes(nodes, 0.001)) == 2  # at least one of each kind
    with pytest.raises(SpecError, match="node fraction"):
        sample_nodes(nodes, 0)


def test_cli_json_report_and_bad_policy(tmp_path):
    n, p = openb_trace(tmp_path, OPENB_SMALL)
    report = tmp_path / "r.html"
    run = gpupool(
        "simulate", "openb-time", "--nodes", str(n), "--pods", str(p), "--policies",
        "fgd,best-fit", "--json", "--report", str(report), "--csv", str(tmp_path / "s.csv"),
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert set(out["policies"]) == {"fgd", "best-fit"}
    assert set(out["policies"]["fgd"]) == {"fractional", "whole-cards"}
    # the replay ends with the last arrival (the trace's snapshot): c has just arrived
    fgd = out["policies"]["fgd"]["fractional"]
    assert (fgd["started"], fgd["never_started"]) == (2, 1)
    text = report.read_text()
    assert "<svg" in text and "http" not in text.replace("http://www.w3.org", "")
    bad = gpupool("simulate", "openb-time", "--nodes", str(n), "--pods", str(p), "--policies", "x")
    assert bad.returncode == 2 and "policy: 'x' is not one of" in bad.stderr
