"""sbatch as users write it (issue 45), judged on batch scripts nobody here wrote: 21 from
public repositories (tests/data/slurm-corpus, each naming its source). For each, gpupool
runs what Slurm would run on the same cluster — one node's request, the nodes, the time, the
array, the name and outputs — or refuses naming the option it cannot honour. Every #SBATCH
line was ignored before (22 of 22 scripts ran as 1-CPU jobs with no GPU)."""

import shlex

import pytest
import yaml

from gpupool.model import SpecError
from gpupool.model.sbatch import Site, memory_mib, translate
from gpupool.model.sbatch_options import read_words, script_options
from tests.support.paths import DATA

CORPUS = DATA / "slurm-corpus"
EXPECTED = yaml.safe_load((CORPUS / "expected.yaml").read_text())
SITE = Site(
    partitions={p: "" for p in ("gpu", "gputest", "train", "defq", "dgx2", "PGR-Standard")}
    | {"plgrid-gpu-a100": "A100", "gpu-v100-preempt": "V100"}
)
FIELDS = ("request", "nodes", "time_s", "name", "array", "output", "error", "tenant",
          "tasks_per_node", "checkpoint")  # fmt: skip


def _options(name: str, expected: dict):
    if "command_line" in expected:
        options, rest = read_words(shlex.split(expected["command_line"]), "the command line")
        assert rest == ["cluster_job_submit.sh"]
        return options
    return script_options((CORPUS / name).read_text(), name)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_real_batch_script_runs_as_slurm_would_run_it_or_is_refused_by_name(name):
    expected = EXPECTED[name]
    if "refused" in expected:
        with pytest.raises(SpecError) as refused:
            translate(_options(name, expected), SITE)
        assert expected["refused"] in str(refused.value), str(refused.value)
        return
    job = translate(_options(name, expected), SITE)
    got = {f: getattr(job, f) for f in FIELDS if f in expected}
    assert got == {f: expected[f] for f in FIELDS if f in expected}
    for warning in expected.get("warnings", []):
        assert any(warning in w for w in job.warnings), job.warnings
    assert job.env["SLURM_NNODES"] == str(job.nodes)


def test_the_corpus_is_what_the_issue_asks_for():
    assert len(EXPECTED) >= 20
    refused = [n for n, e in EXPECTED.items() if "refused" in e]
    assert 0 < len(refused) < len(EXPECTED) / 2  # most real scripts run


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
        ("#SBATCH --dependency=singleton", "--dependency=singleton is not supported"),
        ("#SBATCH --signal=R:USR1@120", "R: (only when a reservation ends) has no meaning"),
        ("#SBATCH --signal=KILL", "'KILL' cannot be trapped to save work"),
        ("#SBATCH --time=1 --signal=USR1@60", "@60 is not before the 60-s time limit"),
        ("#SBATCH --frobnicate", "unknown sbatch option --frobnicate"),
        ("#SBATCH --pa=gpu", "--pa is ambiguous"),
        ("#SBATCH -Z", "unknown sbatch option -Z"),
        ("#SBATCH --output=slurm-%t.out", "only %j %A %a %x %u %N are expanded"),
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
