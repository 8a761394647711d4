"""Paths and times as Slurm has them (issue 63): sbatch's filename patterns (%J, padding, a
backslash), absolute --output paths written only as the job's user, --begin's formats, node
lists and --time read without range checks."""

import os
from datetime import datetime

import pytest

from gpupool.agent.job_output import plan_for
from gpupool.model import SpecError
from gpupool.model.batch import (
    check_output_path,
    check_pattern,
    deliverable,
    expand_output,
    parse_time,
)
from gpupool.model.hostlist import expand
from gpupool.model.protocol import OrderOut
from gpupool.model.slurm_time import parse_begin


@pytest.mark.parametrize(
    "pattern, expanded",
    [
        ("_%x%J.out", "_train128.out"),  # the script: %J is the batch script's id
        ("job%4j.out", "job0128.out"),
        ("job%2j-%2t.out", "job128-00.out"),  # the man page's example, for the batch task
        ("%A_%a_%b.%s", "120_13_3.batch"),
        ("%N-%n.log", "n2-1.log"),
        ("100%%-%u", "100%-alice"),
        ("x%q%Z", "x%q%Z"),  # not a pattern: kept as written, as Slurm keeps it
        ("a\\%j\\\\b", "a%jb"),  # a backslash: nothing expanded, backslashes dropped
        ("%a%b", ""),  # no array: empty
    ],
)
def test_sbatch_filename_patterns_expand_as_slurm_expands_them(pattern, expanded):
    array = (120, 13) if "%A" in pattern else (None, None)
    got = expand_output(pattern, 128, *array, name="train", user="alice", node="n2",
                        node_index=1)  # fmt: skip
    assert got == expanded


def test_paths_slurm_accepts_and_those_gpupool_refuses_by_name():
    for path in ("/scratch/u/%j.out", "../logs/x.out", "logs/%x.%J.out"):
        assert check_output_path(path) == path
    assert not deliverable("/scratch/u/1.out") and not deliverable("../x") and deliverable("a/b")
    for bad, words in (("~/x.out", "starts with ~"), ("a\nb", "line break")):
        with pytest.raises(SpecError, match=words):
            check_output_path(bad)
    with pytest.raises(SpecError, match=r"%r in 'x-%r\.out': the restart count is not kept"):
        check_pattern("x-%r.out")


def _order(**fields) -> OrderOut:
    base = {"id": 7, "job_id": 5, "tenant": "algo", "generation": 1, "state": "active",
            "borrowed": False, "action": "allocate", "after": [], "created_at": 0.0,
            "released_at": None, "release_reason": "", "job_name": "abs",
            "job_state": "running", "on_lost": "requeue", "command": ["true"], "env": {},
            "image": None, "max_runtime_s": None,
            "nodes": [{"node": "n1", "cpu_millis": 1000, "mem_mib": 1, "devices": []}]}  # fmt: skip
    return OrderOut.model_validate({**base, **fields})


def test_an_absolute_output_is_planned_without_a_directory_and_never_as_root():
    plan = plan_for(_order(output="/scratch/%x/%J.out"), "n1", 1234, 1234)
    assert plan is not None and plan.output == "/scratch/abs/5.out" and plan.directory == "/"
    if os.geteuid() == 0:  # an agent that runs workloads as root writes no such path
        with pytest.raises(SpecError, match="written only as the job's own user"):
            plan_for(_order(output="/scratch/x.out", submit_dir="/home/a"), "n1", None, None)
        relative = plan_for(_order(output="x.out", submit_dir="/home/a"), "n1", None, None)
        assert relative is not None and relative.output == "x.out"  # inside: as before


def test_begin_times_as_slurm_reads_them():
    now = datetime(2026, 12, 7, 14, 30).timestamp()  # in the machine's zone, as sbatch
    at = {t: datetime.fromtimestamp(parse_begin(t, now)) for t in
          ("now+1hour", "now+60", "16:00", "10:00", "2026-12-24T08:00", "01/05", "tomorrow",
           "teatime", "12/24-10:30")}  # fmt: skip
    assert at["now+1hour"] == datetime(2026, 12, 7, 15, 30)
    assert at["now+60"] == datetime(2026, 12, 7, 14, 31)  # seconds without a unit
    assert at["16:00"] == datetime(2026, 12, 7, 16, 0)
    assert at["10:00"] == datetime(2026, 12, 8, 10, 0)  # past today: tomorrow's
    assert at["2026-12-24T08:00"] == datetime(2026, 12, 24, 8, 0)
    assert at["01/05"] == datetime(2027, 1, 5)  # past this year: next year's
    assert at["tomorrow"] == datetime(2026, 12, 8)
    assert at["teatime"] == datetime(2026, 12, 7, 16, 0)
    assert at["12/24-10:30"] == datetime(2026, 12, 24, 10, 30)
    for bad in ("someday", "now+1fortnight", "25:00", "2026-13-01"):
        with pytest.raises(SpecError, match="is not a time sbatch reads"):
            parse_begin(bad, now)


def test_node_lists_and_slurm_times():
    assert expand("node-[01-03],gpu7,node-01") == ["node-01", "node-02", "node-03", "gpu7"]
    assert expand("dgx[1-2,5]") == ["dgx1", "dgx2", "dgx5"]
    for bad in ("n[3-1]", "n[1-", "a b"):
        with pytest.raises(SpecError):
            expand(bad)
    assert parse_time("0:120:0", strict=False) == 7200  # Slurm adds fields up
    with pytest.raises(SpecError, match="out of range"):
        parse_time("0:120:0")  # gpupool's own --time stays strict
