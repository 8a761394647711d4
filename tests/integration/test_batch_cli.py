"""sbatch and scancel habits: Slurm time formats, job scripts with #GPUPOOL directives (the
script travels as the command), cancelling by several ids or by filters."""

import json

import pytest

from gpupool.model import SpecError
from gpupool.model.batch import parse_script, parse_time
from tests.support.cli import gpupool
from tests.support.cluster import seed_cluster


@pytest.mark.parametrize(
    "text, seconds",
    [("90", 5400), ("1:30", 90), ("4:00:00", 14400), ("2-12", 216000), ("2-12:30", 217800),
     ("0-00:00:05", 5), ("2h", 7200), ("90m", 5400), ("1d12h", 129600), ("45s", 45)],
)  # fmt: skip
def test_slurm_time_formats_and_the_units_every_other_duration_takes(text, seconds):
    assert parse_time(text) == seconds


@pytest.mark.parametrize("text", ["25:99", "4:61:00", "1-24", "0", "", "0h", "2x", "h", "-5"])
def test_bad_times_are_refused(text):
    with pytest.raises(SpecError, match="time: "):
        parse_time(text)


def test_directives_stop_at_the_first_command_line():
    script = parse_script(
        "#!/bin/bash\n# a comment\n#GPUPOOL --gpu A100-80G:2 --cpu=8\n\n"
        "#GPUPOOL --time 4:00:00 --name 'my run'\necho hi\n#GPUPOOL --gpu 9\n",
        "train.sh",
    )
    assert script.options == {
        "--gpu": "A100-80G:2", "--cpu": "8", "--time": "4:00:00", "--name": "my run",
    }  # fmt: skip
    assert script.command[:2] == ["/bin/bash", "-c"] and script.command[-1] == "train.sh"
    with pytest.raises(SpecError, match="line 2: unknown directive '--gres'"):
        parse_script("#!/bin/sh\n#GPUPOOL --gres gpu:2\n")
    with pytest.raises(SpecError, match="line 1: --gpu needs a value"):
        parse_script("#GPUPOOL --gpu\ntrue\n")


def test_submit_a_script_and_cancel_by_filters(sqlite_server, tmp_path):
    seed_cluster(sqlite_server.admin(), nodes=1, cards=4, tenants={"algo": 4, "dev": 2})
    env = {"GPUPOOL_SERVER": sqlite_server.url, "GPUPOOL_TOKEN": sqlite_server.admin_token}
    script = tmp_path / "train.sh"
    script.write_text(
        "#!/bin/sh\n#GPUPOOL --gpu 2 --cpu 4 --time 1:30:00\n#GPUPOOL --name train\necho step 1\n"
    )
    out = gpupool("job", "submit", "--tenant", "algo", str(script), "--json", env=env)
    assert out.returncode == 0, out.stderr
    job = json.loads(out.stdout)
    assert (job["request"], job["name"], job["max_runtime_s"]) == ("gpu=2,cpu=4000m", "train", 5400)
    assert job["command"] == ["/bin/sh", "-c", script.read_text(), "train.sh"]
    # a flag given on the command line wins over the script's directive
    out = gpupool("job", "submit", "--tenant", "algo", "--name", "other", "-t", "10",
                  str(script), "--json", env=env)  # fmt: skip
    second = json.loads(out.stdout)
    assert (second["name"], second["max_runtime_s"]) == ("other", 600)
    bad = tmp_path / "bad.sh"
    bad.write_text("#!/bin/sh\n#GPUPOOL --time 25:99\ntrue\n")
    r = gpupool("job", "submit", "--tenant", "algo", str(bad), env=env)
    assert r.returncode == 2 and "time: '25:99'" in r.stderr and "Traceback" not in r.stderr
    dev = [
        json.loads(gpupool("job", "submit", "--tenant", "dev", "--name", n, "--cpu", "1",
                           "--json", "--", "true", env=env).stdout)["id"]
        for n in ("a", "b", "a")
    ]  # fmt: skip
    r = gpupool("job", "cancel", "--tenant", "dev", "--name", "a", "--json", env=env)
    assert r.returncode == 0, r.stderr
    assert sorted(j["id"] for j in json.loads(r.stdout)) == [dev[0], dev[2]]
    r = gpupool("job", "cancel", str(job["id"]), str(second["id"]), env=env)
    assert r.stdout.count("cancelled") == 2
    assert gpupool("job", "cancel", "--tenant", "dev", "--name", "zz", env=env).stdout.strip() == (
        "no job matched"
    )
    r = gpupool("job", "cancel", env=env)
    assert r.returncode == 2 and "give job ids" in r.stderr
