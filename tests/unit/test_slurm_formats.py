"""Slurm's output formats as scripts write them (issue 63): format strings taken from public
scripts, each cited, parse to the columns Slurm prints for them — its widths, justification,
cuts, headers, state and reason words, time and memory units — and a field gpupool cannot
print is refused naming it."""

import time

import pytest

from gpupool.cli import slurm_cli
from gpupool.cli import slurm_format as fmt
from gpupool.cli import slurm_jobs as sj
from gpupool.cli.array_refs import task_refs
from gpupool.cli.slurm_nodes import sinfo_lines
from gpupool.cli.views import ACCT_FIELDS
from gpupool.model import SpecError

NOW = 1_765_000_000.0  # 2025-12-06T05:46:40Z


@pytest.fixture(autouse=True)
def utc(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def _node(name: str, cards: int) -> dict:
    return {"node": name, "cpu_millis": 16000, "mem_mib": 65536,
            "devices": [{"device": i} for i in range(cards)]}  # fmt: skip


RUNNING = {
    "id": 7, "tenant": "algo", "name": "train-llama", "request": "gpu=A100-80G:4,cpu=16,mem=64Gi",
    "priority_class": "training", "priority": 100, "gang_size": 2, "max_runtime_s": 7200,
    "on_lost": "requeue", "state": "running", "reason": "", "wait_code": "",
    "submitted_by": "alice", "submit_time": NOW - 600, "started_at": NOW - 300,
    "finished_at": None, "exit_code": None, "dependency": [], "array_job": None,
    "array_index": None, "output": None, "error": None, "chdir": None,
    "submit_dir": "/home/alice/x", "begin_at": None, "nodelist": None, "exclude": None,
    "allocation": {"nodes": [_node("n01", 4), _node("n02", 4)]},
}  # fmt: skip
PENDING = RUNNING | {
    "id": 9, "state": "pending", "started_at": None, "allocation": None, "name": "sweep",
    "reason": "begin time: ...", "wait_code": "gated", "begin_at": 4_000_000_000.0,
    "array_job": 8, "array_index": 0,
    "gang_size": 1, "request": "gpu=A100-80G:2,cpu=8,mem=1000", "max_runtime_s": 1800,
}  # fmt: skip
DONE = RUNNING | {"id": 5, "state": "succeeded", "finished_at": NOW - 10, "exit_code": 0}
KILLED = RUNNING | {"id": 6, "state": "failed", "finished_at": NOW - 5, "exit_code": -9}


def _squeue(percent: str, jobs: list[dict]) -> list[str]:
    columns = sj.squeue_columns(now=NOW)
    prefix, fields = fmt.parse_percent(percent, columns, "--format")
    return fmt.render(jobs, prefix, fields, columns)


def test_squeue_o_from_a_public_script_prints_slurms_columns():
    # tdayris/snakemake-wrappers, bigr_pipelines/common/bash/my_jobs.sh (its sed colours
    # RUNNING / PENDING / COMPLETED by the words %T prints)
    lines = _squeue("%.10i %.9P %.35j %.8u %.8T %.10M %.10l %.6D %.3C %.10m %R",
                    [PENDING, RUNNING])  # fmt: skip
    assert lines == [
        "     JOBID PARTITION                                NAME     USER    STATE       TIME"
        " TIME_LIMIT  NODES CPU MIN_MEMORY NODELIST(REASON)",
        "       8_0   gpupool                               sweep    alice  PENDING       0:00"
        "      30:00      1   8      1000M (BeginTime)",
        "         7   gpupool                         train-llama    alice  RUNNING       5:00"
        "    2:00:00      2  32        64G n[01-02]",
    ]


def test_squeue_o_without_widths_and_with_a_prefix_and_suffixes():
    # thammegowda/dotfiles, slurm-env.sh: left-justified widths; a literal prefix and suffix
    lines = _squeue("%8i %9u %30j %2t %12M %12l %5D %3C %10R", [RUNNING])
    assert lines[1] == ("7        alice     train-llama                    R  5:00         "
                        "2:00:00      2     32  n[01-02]  ")  # fmt: skip
    assert _squeue(">%i|%T<", [RUNNING]) == [">JOBID|STATE<", ">7|RUNNING<"]


def test_a_node_list_is_never_cut_and_a_pending_reason_is():
    lines = _squeue("%.18i %.5R", [PENDING, RUNNING])
    assert lines[1].endswith(" (Begi") and lines[2].endswith(" n[01-02]")


def test_squeue_O_from_a_public_script():
    # simon-ging/dotfiles, bash/slurm.sh (its squeue_format_short, used with -O)
    spec = ("JobArrayID:.19 ,Partition:.9 ,Name:.20 ,UserName:.8 ,StateCompact:.2 ,"
            "TimeUsed:.10 ,NumNodes:.1 ,tres-per-node:.16 ,ReasonList:.10")  # fmt: skip
    columns = sj.squeue_columns(now=NOW)
    lines = fmt.render([RUNNING], "", fmt.parse_long(spec, sj.SQUEUE_NAMES, "-O"), columns)
    assert lines == [
        "              JOBID PARTITION                 NAME     USER ST       TIME N "
        "   TRES_PER_NODE NODELIST(R",
        "                  7   gpupool          train-llama    alice  R       5:00 2 "
        "      gres/gpu:4   n[01-02]",
    ]


def test_a_field_gpupool_cannot_print_is_refused_naming_it():
    with pytest.raises(SpecError, match="--format: %z is not a field gpupool prints"):
        _squeue("%.18i %z", [RUNNING])
    with pytest.raises(SpecError, match="-O: 'tres-alloc' is not a field gpupool prints"):
        fmt.parse_long("JobID,tres-alloc:80", sj.SQUEUE_NAMES, "-O")
    with pytest.raises(SpecError, match="--format: 'Group' is not an sacct field"):
        fmt.parse_sacct("JobID,Group", sj.sacct_fields(now=NOW))
    with pytest.raises(SpecError, match="after % comes a width"):
        fmt.parse_sacct("JobID%x", sj.sacct_fields(now=NOW))


def _sacct(spec: str, jobs: list[dict], **kw) -> list[str]:
    return fmt.render_sacct(jobs, fmt.parse_sacct(spec, sj.sacct_fields(now=NOW)), **kw)


def test_sacct_format_from_public_scripts():
    # hexaeder/DynamicCascades.jl, scripts/archive_nb/pipeline_WS_v1/
    # WS_sacct_postprocessing_v1.sh (less its --units=M): headers right-justified, values as
    # their width says (JobID left, %30 right), a longer one cut with +
    spec = "JobID,JobName,Submit,Start,End,State,Partition,ReqTRES%30,CPUTime,Elapsed," \
           "MaxRSS,NodeList%30"  # fmt: skip
    assert _sacct(spec, [DONE]) == [
        "       JobID    JobName              Submit               Start                 End "
        "     State  Partition                        ReqTRES    CPUTime    Elapsed     MaxRSS "
        "                      NodeList ",
        "------------ ---------- ------------------- ------------------- ------------------- "
        "---------- ---------- ------------------------------ ---------- ---------- ---------- "
        "------------------------------ ",
        "5            train-lla+ 2025-12-06T05:36:40 2025-12-06T05:41:40 2025-12-06T05:46:30 "
        " COMPLETED    gpupool cpu=32,mem=128G,node=2,gres/g+   02:34:40   00:04:50            "
        "                      n[01-02] ",
    ]
    # subugoe/operandi, src/utils/operandi_utils/hpc/batch_scripts/
    # wrapper_check_workflow_job_status.sh: lower-case names, %-20 left-justified
    lines = _sacct("jobid%-20,state%-20,exitcode", [DONE, KILLED])
    assert lines[0] == "               JobID                State ExitCode "
    assert lines[2:] == [
        "5                    COMPLETED                 0:0 ",
        "6                    FAILED                    0:9 ",
    ]


def test_sacct_parsable_without_header_from_a_public_script():
    # apel/apel, scripts/slurm_acc.sh (less its Group field): sacct -P -n --format=...
    spec = "JobID,JobName,User,Start,End,Elapsed,CPUTimeRAW,Partition,NCPUS,NNodes,NodeList," \
           "MaxRSS,MaxVMSize,State"  # fmt: skip
    assert _sacct(spec, [DONE], header=False, parsable="P") == [
        "5|train-llama|alice|2025-12-06T05:41:40|2025-12-06T05:46:30|00:04:50|9280|gpupool|32|"
        "2|n[01-02]|||COMPLETED"
    ]
    assert _sacct("JobID,State", [DONE], parsable="p") == ["JobID|State|", "5|COMPLETED|"]


def test_a_value_longer_than_its_sacct_width_ends_in_plus():
    assert _sacct("JobName%5", [DONE])[2] == "trai+ "


def test_scontrol_show_job_pairs_scripts_grep():
    text = slurm_cli.show_job_text(PENDING, oneliner=False)
    lines = text.splitlines()
    assert lines[0] == "JobId=9 ArrayJobId=8 ArrayTaskId=0 JobName=sweep"
    assert all(line.startswith("   ") for line in lines[1:])
    assert "   JobState=PENDING Reason=BeginTime Dependency=(null)" in lines
    one = slurm_cli.show_job_text(RUNNING, oneliner=True)
    assert "\n" not in one and " NodeList=n[01-02] " in one and "JobState=RUNNING" in one
    assert " NumNodes=2 NumCPUs=32 " in one and "TRES=cpu=32,mem=128G,node=2,gres/gpu=8" in one


def test_states_and_reasons_in_slurms_words_decided_by_typed_fields():
    def why(job: dict, states: dict | None = None) -> str:
        return sj.reason(PENDING | {"begin_at": None} | job, states, NOW)

    # the reason's words are not read: only the job's fields and the cycle's wait code
    assert why({"held": True, "reason": "anything"}) == "JobHeldUser"
    assert why({"begin_at": NOW + 60, "reason": ""}) == "BeginTime"
    assert why({"begin_at": NOW - 60, "wait_code": "no-room"}) == "Resources"
    after = {"dependency": [{"type": "afterok", "job": 3}], "reason": ""}
    assert why(after, {3: ["running"]}) == "Dependency"
    assert why(after, {3: ["failed"]}) == "DependencyNeverSatisfied"
    assert why(after | {"array_limit": 2}, {3: ["succeeded"]}) == "JobArrayTaskLimit"  # met
    assert why({"dependency": [{"type": "singleton"}], "array_job": None}) == "Dependency"
    assert why({"wait_code": "behind"}) == "Priority"
    assert why({"wait_code": ""}) == "None"  # not yet judged by a cycle
    assert sj.state(RUNNING | {"state": "admitted"}) == "CONFIGURING"
    assert sj.state(RUNNING | {"state": "admitted"}, sacct=True) == "RUNNING"


def test_slurm_words_for_live_states_and_job_ranges():
    own = "pending or running"
    assert slurm_cli.live_states("PD", "--state", own) == ("pending",)
    assert slurm_cli.live_states("running,pending", "-t", own) == (
        "admitted", "running", "pending"
    )  # fmt: skip
    with pytest.raises(SpecError, match="--state: 'CD' is not pending or running"):
        slurm_cli.live_states("CD", "--state", own)
    assert task_refs("24_[1-3,7]") == [(24, 1), (24, 2), (24, 3), (24, 7)]
    assert task_refs("24_3") == [(24, 3)] and task_refs("24") == [(24, None)]
    with pytest.raises(SpecError, match="'3-1' is neither"):
        task_refs("24_[3-1]")
    assert slurm_cli.job_refs("1,2_[1,3]") == [(1, None), (2, 1), (2, 3)]


def test_acct_format_is_sacct_when_a_name_is_not_gpupools():
    assert not slurm_cli.is_sacct("id,state,card_hours", ACCT_FIELDS)
    assert slurm_cli.is_sacct("JobID,State", ACCT_FIELDS)
    assert slurm_cli.is_sacct("state,elapsed,maxrss", ACCT_FIELDS)
    assert not slurm_cli.is_sacct("id,bogus", ACCT_FIELDS)  # refused there: unknown column
    assert slurm_cli.is_sacct("JobID,Group", ACCT_FIELDS)  # refused there: not an sacct field
    with pytest.raises(SpecError, match=r"unknown column 'bogus' \(gpupool's: id, .*JobID"):
        slurm_cli.is_sacct("bogus", ACCT_FIELDS)
    with pytest.raises(SpecError, match="'card_hours' is one of gpupool's columns and 'JobID'"):
        slurm_cli.is_sacct("card_hours,JobID", ACCT_FIELDS)


def _api_node(name: str, used: int = 0, state: str = "up", schedulable: bool = True) -> dict:
    return {
        "name": name, "state": state, "schedulable": schedulable, "cpu_millis": 64000,
        "memory_mib": 524288, "drain_reason": "" if schedulable else "maintenance",
        "devices": [{"index": i, "model": "A100-80G"} for i in range(4)],
        "devices_in_use": list(range(used)), "cpu_allocated_millis": 8000 * used,
        "mem_allocated_mib": 65536 * used,
    }  # fmt: skip


NODES = [_api_node("s00", 4), _api_node("s01"), _api_node("s02"), _api_node("s03", 1),
         _api_node("s04", state="lost"), _api_node("s05", 2, schedulable=False)]  # fmt: skip


def test_sinfo_o_groups_nodes_alike_as_sinfo_does():
    # slaclab/slurm-telegraf, run.sh: sinfo -h -e -o '%R %m %c %f %G %T %D %C'
    lines = sinfo_lines(NODES, "%R %m %c %f %G %T %D %C", header=False, node_oriented=False)
    assert lines == [
        "gpupool 524288 64 A100-80G gpu:A100-80G:4 allocated 1 32/32/0/64",
        "gpupool 524288 64 A100-80G gpu:A100-80G:4 idle 2 0/128/0/128",
        "gpupool 524288 64 A100-80G gpu:A100-80G:4 mixed 1 8/56/0/64",
        "gpupool 524288 64 A100-80G gpu:A100-80G:4 down* 1 0/0/64/64",
        "gpupool 524288 64 A100-80G gpu:A100-80G:4 draining 1 16/0/48/64",
    ]
    # the common view: partition, availability, limit, node count, compact state, nodes
    lines = sinfo_lines(NODES, "%P %a %l %D %t %N", header=True, node_oriented=False)
    assert lines[0] == "PARTITION AVAIL TIMELIMIT NODES STATE NODELIST"
    assert "gpupool* up infinite 2 idle s[01-02]" in lines
    assert "gpupool* up infinite 1 drng s05" in lines


def test_sinfo_node_oriented_from_a_public_cheatsheet():
    # CUBoulder-IBG/ibg_rc_cheatsheet, monitoringSlurmActivity.md:
    # sinfo --Node -o "%.12N %.16P %.11T %.4c %.13C %.8e /%.8m %.30f"
    spec = "%.12N %.16P %.11T %.4c %.13C %.8e /%.8m %.30f"
    lines = sinfo_lines(NODES[:2], spec, header=True, node_oriented=True)
    assert lines == [
        "    NODELIST        PARTITION       STATE CPUS CPUS(A/I/O/T) FREE_MEM /  MEMORY"
        "                 AVAIL_FEATURES",
        "         s00         gpupool*   allocated   64    32/32/0/64   262144 /  524288"
        "                       A100-80G",
        "         s01         gpupool*        idle   64     0/64/0/64   524288 /  524288"
        "                       A100-80G",
    ]
    with pytest.raises(SpecError, match="--format: %Y is not a field gpupool prints"):
        sinfo_lines(NODES, "%n,%c,%Y,%m", header=True, node_oriented=False)
