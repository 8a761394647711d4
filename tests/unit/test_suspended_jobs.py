"""Which suspended Jobs gpupool speaks of or resumes (pure; issue 45)."""

from gpupool.kube.config import parse_config
from gpupool.kube.suspended_jobs import decide_jobs

CONFIG = {"namespaces": {"team-a": "team-a"}, "tenants": [{"name": "team-a"}]}


def _job(ns="team-a", name="j", uid="u1", suspend=True, scheduler="gpupool"):
    return {
        "metadata": {"namespace": ns, "name": name, "uid": uid},
        "spec": {"suspend": suspend, "template": {"spec": {"schedulerName": scheduler}}},
    }


def test_leave_tells_each_suspended_job_of_ours_once():
    config = parse_config(CONFIG)
    jobs = [_job(), _job(name="running", uid="u2", suspend=False),
            _job(name="theirs", uid="u3", scheduler="default-scheduler")]  # fmt: skip
    (action,) = decide_jobs(jobs, config, set())
    assert (action.kind, action.name) == ("tell", "j")
    assert decide_jobs(jobs, config, {"u1"}) == []


def test_admit_resumes_jobs_of_mapped_namespaces_and_tells_the_others():
    config = parse_config({**CONFIG, "suspended_jobs": "admit"})
    actions = decide_jobs([_job(), _job(ns="lab", name="stray", uid="u9")], config, set())
    assert [(a.kind, a.namespace) for a in actions] == [("resume", "team-a"), ("tell", "lab")]
    assert "no tenant's" in actions[1].message


def test_a_job_being_deleted_is_neither_resumed_nor_told():
    config = parse_config({**CONFIG, "suspended_jobs": "admit"})
    going = _job()
    going["metadata"]["deletionTimestamp"] = "2026-12-06T15:00:00Z"
    assert decide_jobs([going], config, set()) == []
