"""sbatch as users write it (issues 45 and 63), judged on batch scripts nobody here wrote: 34
from public repositories (tests/data/slurm-corpus, each naming its source). For each, gpupool
runs what Slurm would run on the same cluster — one node's request, the nodes, the time, the
array, the name and outputs, whole nodes, node lists — or refuses naming every option it
cannot honour, the most fundamental first; and the server places the job on the test's pool,
or refuses it, as Slurm would there (a node name the pool lacks, a shape no node holds). Every
#SBATCH line was ignored before issue 45 (22 of 22 scripts ran as 1-CPU jobs with no GPU)."""

import shlex

import pytest
import yaml

from gpupool.model import Job, SpecError, parse_request
from gpupool.model.sbatch import Refusal, SbatchJob, Site, memory_mib, translate
from gpupool.model.sbatch_options import read_words, script_options
from gpupool.model.sbatch_plan import SCRIPT
from gpupool.scheduler import ClusterState, Placement, Placer
from gpupool.server.errors import ApiError
from gpupool.server.schemas import JobIn
from gpupool.server.submission import check_node_names
from tests.support.builders import cluster
from tests.support.paths import DATA

CORPUS = DATA / "slurm-corpus"
EXPECTED = yaml.safe_load((CORPUS / "expected.yaml").read_text())
ANY_CARD = ("gpu", "gputest", "train", "defq", "dgx2", "PGR-Standard", "xyz-cluster",
            "PARTITION", "gpu_p5", "qingqu")  # fmt: skip
SITE = Site(
    partitions=dict.fromkeys(ANY_CARD, "") | {"plgrid-gpu-a100": "A100", "gpu-v100-preempt": "V100"}
)
FIELDS = ("request", "nodes", "time_s", "name", "array", "output", "error", "tenant",
          "tasks_per_node", "checkpoint", "nodelist", "exclude", "exclusive")  # fmt: skip
NOW = 1_790_000_000.0


def _translate(name: str, expected: dict) -> SbatchJob:
    """The script (or command line) as gpupool sbatch reads it: every problem collected."""
    refusals: list[Refusal] = []

    def refuse(text: str) -> None:
        refusals.append(Refusal(SCRIPT, text, "script"))

    if "command_line" in expected:
        words = shlex.split(expected["command_line"])
        options, rest = read_words(words, "the command line", refuse)
        assert rest == [expected.get("script", "cluster_job_submit.sh")]
    else:
        options = script_options((CORPUS / name).read_text(), name, refuse)
    return translate(options, SITE, refusals, now=NOW)


def on_pool(job: SbatchJob) -> str:
    """What the server does with ``job`` on the test's pool: its node names checked, then
    the request tried on the empty pool as the capacity check does ("runs" or the reason)."""
    pool = cluster()
    body = JobIn(request=job.request, gang_size=job.nodes, one_per_node=job.nodes > 1,
                 nodelist=job.nodelist, exclude=job.exclude, command=["x"])  # fmt: skip
    try:
        check_node_names(body, frozenset(n.name for n in pool))
    except ApiError as exc:
        return exc.detail
    asked = Job("x", parse_request(job.request), gang_size=job.nodes,
                one_per_node=job.nodes > 1, required_nodes=tuple(job.nodelist or ()),
                excluded_nodes=frozenset(job.exclude or ()))  # fmt: skip
    placed = Placer("first-fit").place(ClusterState(pool).use_default_memory(), asked)
    return "runs" if isinstance(placed, Placement) else placed.reason


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_real_batch_script_runs_as_slurm_would_run_it_or_is_refused_by_name(name):
    expected = EXPECTED[name]
    if "refused" in expected or "refused_in_order" in expected:
        with pytest.raises(SpecError) as refused:
            _translate(name, expected)
        said = str(refused.value)
        if "refused" in expected:
            assert expected["refused"] in said, said
        at = [said.find(words) for words in expected.get("refused_in_order", [])]
        assert all(i >= 0 for i in at) and at == sorted(at), said
        assert not [w for w in expected.get("not_refused", []) if w in said], said
        return
    job = _translate(name, expected)
    got = {f: getattr(job, f) for f in FIELDS if f in expected}
    assert got == {f: expected[f] for f in FIELDS if f in expected}
    for warning in expected.get("warnings", []):
        assert any(warning in w for w in job.warnings), job.warnings
    if "begin_in_s" in expected:
        assert job.begin_at == NOW + expected["begin_in_s"]
    assert job.env["SLURM_NNODES"] == str(job.nodes)
    assert expected["pool"] in on_pool(job)


def test_the_corpus_is_what_the_issue_asks_for():
    assert len(EXPECTED) >= 33
    refused = [n for n, e in EXPECTED.items() if "refused" in e or "refused_in_order" in e]
    assert 0 < len(refused) < len(EXPECTED) / 2  # most real scripts run
    texts = "".join(
        (CORPUS / n).read_text() if (CORPUS / n).exists() else e["command_line"]
        for n, e in EXPECTED.items()
    )
    for case in ("%J", "hetjob", "--hint=nomultithread", "--exclusive", "--mem=0",
                 "--output=/home", "-o /path", "--exclude=", "-w ", "--begin=",
                 "--ntasks=4"):  # fmt: skip
        assert case in texts, case


@pytest.mark.parametrize(
    "text, mib", [("4096", 4096), ("10G", 10240), ("512M", 512), ("1T", 1048576), ("20Gb", 20480)]
)
def test_slurm_sizes_are_powers_of_1024_and_a_bare_number_is_mib(text, mib):
    assert memory_mib(text, "x") == mib


@pytest.mark.parametrize(
    "lines, words",
    [
        ("#SBATCH --nodes=1-4", "a range of node counts is not supported"),
        ("#SBATCH --gpus=7 --nodes=2", "does not split evenly"),
        ("#SBATCH --gres=gpu:2 --gpus-per-node=2", "ask for GPUs one way"),
        ("#SBATCH --mem=4G --mem-per-cpu=1G", "ask for memory one way"),
        ("#SBATCH --partition=nowhere", "this site maps no partition 'nowhere'"),
        ("#SBATCH --gres=gpu:rtx2080:1", "GPU type 'rtx2080' is no model gpupool knows"),
        ("#SBATCH --dependency=afterok:1?afterok:2", "'?' (any one condition) is not supported"),
        ("#SBATCH --exclusive=user", "--exclusive=user is not supported"),
        ("#SBATCH --output=slurm-%r.out", "%r in 'slurm-%r.out': the restart count is not kept"),
        ("#SBATCH --nodelist=n[3-1]", "'3-1' in 'n[3-1]' is not N or N-M"),
        ("#SBATCH --nodelist=./hosts.txt", "a file of node names is not read here"),
        ("#SBATCH -N 1 -w a,b", "a job holds every node it names"),
        ("#SBATCH --begin=someday", "is not a time sbatch reads"),
        ("#SBATCH --ntasks=10 --ntasks-per-node=4 -N 2", "more than --ntasks-per-node=4"),
        ("#SBATCH --ntasks=6 -N 4", "does not split evenly"),
        ("#SBATCH --output=~/x.out", "starts with ~, which sbatch does not expand"),
        ("#SBATCH --signal=R:USR1@120", "R: (only when a reservation ends) has no meaning"),
        ("#SBATCH --signal=KILL", "'KILL' cannot be trapped to save work"),
        ("#SBATCH --time=1 --signal=USR1@60", "@60 is not before the 60-s time limit"),
        ("#SBATCH --frobnicate", "unknown sbatch option --frobnicate"),
        ("#SBATCH --pa=gpu", "--pa is ambiguous"),
        ("#SBATCH -Z", "unknown sbatch option -Z"),
        ("#SBATCH --constraint=ib", "gpupool reads a constraint as GPU models"),
    ],
)
def test_what_gpupool_cannot_honour_is_refused_naming_it(lines, words):
    with pytest.raises(SpecError) as refused:
        translate(script_options("#!/bin/sh\n" + lines + "\ntrue\n", "s.sh"), SITE)
    assert words in str(refused.value)
    assert "s.sh: line 2" in str(refused.value)


def test_a_signal_without_a_time_limit_is_still_sent_on_a_stop_and_its_time_said_moot():
    text = "#!/bin/sh\n#SBATCH --gres=gpu:1 --signal=SIGUSR2@90\ntrue\n"
    job = translate(script_options(text, "s.sh"), SITE)
    assert job.checkpoint == {"signal": "USR2", "shell_only": False, "before_limit_s": None}
    assert any("@90 has no effect without --time" in w for w in job.warnings)
    implicit = "#!/bin/sh\n#SBATCH --time=10 --signal=10\ntrue\n"  # Slurm's 60 s by default
    job = translate(script_options(implicit, "s.sh"), SITE)
    assert job.checkpoint == {"signal": "USR1", "shell_only": False, "before_limit_s": 60}
    assert not job.warnings


def test_getopt_spellings_and_comments_are_read_as_sbatch_reads_them():
    text = "\n".join([
        "#!/bin/bash",
        "#SBATCH --part=gpu --out=o.%j   # abbreviations getopt accepts; then a comment",
        "#SBATCH -N2 -G8 -c4 --ntasks-per-node 2",
        "##SBATCH --exclusive",  # commented out
        "#SBATCH --constraint=a100|v100 --mail-type=END",
        "echo hi",
        "#SBATCH --exclusive",  # after the first command: not a directive
    ])  # fmt: skip
    job = translate(script_options(text, "t.sh"), SITE)
    assert (job.request, job.nodes, job.tasks_per_node) == ("gpu=A100|V100:4,cpu=8", 2, 2)
    assert job.output == "o.%j" and job.partition == "gpu"
    assert [w for w in job.warnings if "--mail-type has no effect" in w]
    assert job.env["SLURM_NTASKS"] == "4" and job.env["SLURM_GPUS_PER_NODE"] == "4"


def test_ntasks_wins_over_ntasks_per_node_as_slurm_resolves_them():
    """Issue 63's case: --ntasks=1 with --ntasks-per-node=4 runs one task (Slurm: --ntasks
    takes precedence; --ntasks-per-node is then a maximum), no longer refused."""
    text = "#!/bin/sh\n#SBATCH --ntasks=1\n#SBATCH --ntasks-per-node=4 -c 8 --gres=gpu:1\ntrue\n"
    job = translate(script_options(text, "s.sh"), SITE)
    assert (job.nodes, job.tasks_per_node, job.request) == (1, 1, "gpu=1,cpu=8")
    # nodes from them when -N is not given: 8 tasks, at most 4 a node -> 2 nodes
    text = "#!/bin/sh\n#SBATCH --ntasks=8 --ntasks-per-node=4\ntrue\n"
    job = translate(script_options(text, "s.sh"), SITE)
    assert (job.nodes, job.tasks_per_node) == (2, 4)
