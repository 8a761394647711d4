"""MIG re-layout, executed: agents cut MIG cards where the scheduler granted instances —
destroying idle instances in the way, never one in use — through the simulated backend here
and through NVML (a stand-in that follows NVML's documented rules: legal free placements,
compute instances before a MIG device shows, compute instances destroyed first)."""

import re

import pytest

from gpupool.agent.mig_layout import MigLayoutError, ensure_instances, layouts
from gpupool.devices.detect import Located
from gpupool.devices.nvidia_mig import MigError
from gpupool.devices.nvidia_nvml import NvmlBackend
from gpupool.devices.nvidia_smi import NvidiaSmiBackend, parse_query_xml
from gpupool.devices.nvidia_smi_mig import parse_created, parse_gpu_instances, parse_mig_ids
from gpupool.devices.simulated import simulated_backend
from gpupool.model import SharingMode, SpecError
from gpupool.sharing.runtime_env import Grant, LocalDevice
from tests.support.agents import (  # noqa: F401 (the fixture kills leftover workloads)
    agent_thread,
    in_state,
    make_agent,
    no_workload_outlives_its_test,
    printing_env,
    two_teams_and_a_node,
    wait_for,
)
from tests.support.cluster import ok, submit
from tests.support.fake_nvml import FakeNvml
from tests.support.fake_smi import FakeSmi
from tests.support.paths import A100_MIG_XML


def test_the_simulated_backend_cuts_like_nvml():
    backend = simulated_backend("simulated:1xA100-80G:mig", "n1")
    (card,) = backend.discover()
    assert card.mode is SharingMode.MIG and card.mig == ()
    made = backend.create_mig(0, "3g.40gb", 4)
    assert (made.profile, made.start) == ("3g.40gb", 4) and made.memory_mib > 39000
    with pytest.raises(SpecError, match="cannot start at slice 4"):
        backend.create_mig(0, "1g.10gb", 4)  # overlaps
    with pytest.raises(SpecError, match="cannot start at slice 1"):
        backend.create_mig(0, "3g.40gb", 1)  # not a legal start
    backend.destroy_mig(0, made.uuid)
    assert backend.discover()[0].mig == ()
    whole = simulated_backend("simulated:1xA100-80G", "n1")
    with pytest.raises(SpecError, match="not in MIG mode"):
        whole.create_mig(0, "3g.40gb", 4)


def test_nvml_destroys_idle_instances_then_creates_the_granted_one():
    nvml = FakeNvml(parse_query_xml(A100_MIG_XML.read_text()))  # 4 x 1g.20gb at 0, 2, 4, 6
    backend = NvmlBackend(nvml)
    (card,) = backend.discover()
    loc = {0: Located(0, card, backend)}
    instances = tuple((m.profile, m.start, m.uuid) for m in card.mig)
    local = {0: LocalDevice(card.vendor, 0, card.uuid, instances)}
    grant = Grant(0, 42, 40960, False, mig_profile="3g.40gb", mig_start=4)
    busy = {card.mig[2].uuid}  # a workload runs on the instance at slice 4
    with pytest.raises(MigLayoutError, match=r"overlaps instances in use \(1g\.20gb@4"):
        ensure_instances([grant], local, loc, busy)
    assert nvml.calls == []  # nothing touched
    done = ensure_instances([grant], local, loc, set())
    assert done == [
        "destroyed 1g.20gb@4 on device 0",
        "destroyed 1g.20gb@6 on device 0",
        "created 3g.40gb@4 on device 0",
    ]
    assert [c[0] for c in nvml.calls] == [
        "destroy-ci", "destroy-gi", "destroy-ci", "destroy-gi", "create-gi", "create-ci",
    ]  # fmt: skip
    (card,) = backend.discover()
    assert [(m.profile, m.start) for m in card.mig] == [
        ("1g.20gb", 0),
        ("1g.20gb", 2),
        ("3g.40gb", 4),
    ]
    assert layouts(local, loc) == {0: ["1g.20gb@0", "1g.20gb@2", "3g.40gb@4"]}
    assert local[0].mig[-1][2] == card.mig[-1].uuid  # the UUID CUDA gets is NVML's
    assert ensure_instances([grant], local, loc, set()) == []  # exists: nothing to do


def test_nvml_refusals_are_clear_errors():
    nvml = FakeNvml(parse_query_xml(A100_MIG_XML.read_text()))
    backend = NvmlBackend(nvml)
    with pytest.raises(MigError, match=r"cannot create 3g\.40gb at slice 4"):
        backend.create_mig(0, "3g.40gb", 4)  # the 1g instances are still there
    (card,) = backend.discover()
    nvml.gpus[0].migs[0].processes = [(4242, 100)]
    with pytest.raises(MigError, match="cannot destroy MIG instance"):
        backend.destroy_mig(0, card.mig[0].uuid)
    with pytest.raises(MigError, match="no MIG instance MIG-nope"):
        backend.destroy_mig(0, "MIG-nope")


def test_nvidia_smi_cuts_like_nvml_when_the_binding_is_missing():
    """The same story as NVML's, through ``nvidia-smi mig`` (the stand-in tool runs on the
    NVML stand-in's driver state): placements come from ``-lgi``, the compute instance is
    destroyed before its GPU instance, the new one is made at the granted placement."""
    nvml = FakeNvml(parse_query_xml(A100_MIG_XML.read_text()))  # 4 x 1g.20gb at 0, 2, 4, 6
    smi = FakeSmi(nvml, A100_MIG_XML.read_text())
    backend = NvidiaSmiBackend(run=smi)
    card = backend.discover()[0]
    assert [(m.profile, m.start) for m in card.mig] == [("1g.20gb", s) for s in (0, 2, 4, 6)]
    assert all(m.uuid.startswith("MIG-") for m in card.mig)
    loc = {0: Located(0, card, backend)}
    local = {0: LocalDevice(card.vendor, 0, card.uuid, tuple((m.profile, m.start, m.uuid)
                                                              for m in card.mig))}  # fmt: skip
    grant = Grant(0, 42, 40960, False, mig_profile="3g.40gb", mig_start=4)
    with pytest.raises(MigLayoutError, match="overlaps instances in use"):
        ensure_instances([grant], local, loc, {card.mig[3].uuid})
    assert not [c for c in smi.commands if " mig -i " in c]  # nothing touched
    assert ensure_instances([grant], local, loc, set())[-1] == "created 3g.40gb@4 on device 0"
    orders = [c.split(" mig ")[1] for c in smi.commands if " mig -i " in c]
    assert orders == [
        "-i 0 -dci -gi 5 -ci 0", "-i 0 -dgi -gi 5",
        "-i 0 -dci -gi 6 -ci 0", "-i 0 -dgi -gi 6",
        "-i 0 -cgi 9:4 -C",
    ]  # fmt: skip
    card = backend.discover()[0]
    assert [(m.profile, m.start) for m in card.mig] == [
        ("1g.20gb", 0), ("1g.20gb", 2), ("3g.40gb", 4),
    ]  # fmt: skip
    assert local[0].mig[-1][2] == card.mig[-1].uuid
    # refusals name the card and what the tool said
    with pytest.raises(MigError, match=r"cannot create 1g\.20gb at slice 4: .*Insufficient"):
        backend.create_mig(0, "1g.20gb", 4)
    with pytest.raises(MigError, match=r"has no profile '5g\.99gb'"):
        backend.create_mig(0, "5g.99gb", 0)
    nvml.gpus[0].migs[0].processes = [(4242, 100)]
    with pytest.raises(MigError, match=r"cannot destroy MIG instance .*In use by another client"):
        backend.destroy_mig(0, card.mig[0].uuid)
    with pytest.raises(MigError, match="no MIG instance MIG-nope"):
        backend.destroy_mig(0, "MIG-nope")


@pytest.mark.parametrize(
    "text, said",
    [
        ("Segmentation fault\n", "not a GPU instance table ('Segmentation fault')"),
        ("| GPU instances: |\n|   0  MIG 3g.40gb   9   2   0:4   |\n|   0  MIG 1g.10gb  19  x |\n",
         "line 3 is not an instance row"),
    ],
)  # fmt: skip
def test_nvidia_smi_garbage_is_a_clear_error(text, said):
    with pytest.raises(MigError, match=re.escape(said)):
        parse_gpu_instances(text)


def test_nvidia_smi_answers_that_are_not_refusals_or_rows():
    assert parse_gpu_instances("No GPU instances found: Not Found\n") == []
    with pytest.raises(MigError, match="did not report a GPU instance with its compute"):
        parse_created("Successfully created GPU instance ID  2 on GPU  0 using profile x\n", 0)
    with pytest.raises(MigError, match="not XML"):
        parse_mig_ids("<nvidia_smi_log")


def test_a_whole_card_backend_without_mig_control_says_so():
    class Plain:
        name = "tool"

    backend = simulated_backend("simulated:1xA100-80G:mig", "n1")
    (card,) = backend.discover()
    grant = Grant(0, 42, 40960, False, mig_profile="3g.40gb", mig_start=4)
    local = {0: LocalDevice(card.vendor, 0, card.uuid, ())}
    with pytest.raises(MigLayoutError, match="cannot create one"):
        ensure_instances([grant], local, {0: Located(0, card, Plain())}, set())


def test_the_agent_cuts_the_card_as_jobs_come_and_reports_the_layout(tmp_path):
    with two_teams_and_a_node(tmp_path, devices="simulated:1xA100-80G:mig") as srv:
        admin = srv.admin()
        cmd = printing_env("CUDA_VISIBLE_DEVICES")
        a = submit(admin, "mig=3g.40gb", "algo", command=cmd)
        b = submit(admin, "mig=3g.40gb", "algo", command=cmd)
        for job in (a, b):
            wait_for("running", in_state(admin, job["id"], "running"))

        def layout():
            (dev,) = ok(admin.get("/api/v1/nodes/n1"))["devices"]
            return dev["telemetry"].get("mig")

        assert wait_for("layout", lambda: layout() and len(layout()) == 2 and layout()) == [
            "3g.40gb@0",
            "3g.40gb@4",
        ]
        (tile,) = ok(admin.get("/api/v1/devices"))  # what the dashboard draws
        assert tile["mig_layout"] == ["3g.40gb@0", "3g.40gb@4"]
        seen = wait_for("log", lambda: ok(admin.get(f"/api/v1/jobs/{a['id']}/logs"))["chunks"])
        assert seen[0]["text"].startswith("MIG-sim-n1-0-3g.40gb-")
        for job in (a, b):
            ok(admin.post(f"/api/v1/jobs/{job['id']}/cancel"))
        # the card is free: a 7g job gets it, the idle 3g instances are destroyed first
        c = submit(admin, "mig=7g.80gb", "algo", command=cmd)
        wait_for("7g running", in_state(admin, c["id"], "running"), timeout=30)
        assert wait_for("7g layout", lambda: layout() == ["7g.80gb@0"] and layout())
        seen = wait_for("7g log", lambda: ok(admin.get(f"/api/v1/jobs/{c['id']}/logs"))["chunks"])
        assert seen[0]["text"].startswith("MIG-sim-n1-0-7g.80gb-0")
        ok(admin.post(f"/api/v1/jobs/{c['id']}/cancel"))


def test_two_grants_behind_one_idle_instance_destroy_it_once():
    backend = simulated_backend("simulated:1xA100-80G:mig", "n1")
    big = backend.create_mig(0, "7g.80gb", 0)  # idle, in the way of both
    (card,) = backend.discover()
    loc = {0: Located(0, card, backend)}
    local = {0: LocalDevice(card.vendor, 0, card.uuid, ((big.profile, big.start, big.uuid),))}
    grants = [
        Grant(0, 42, 40960, False, mig_profile="3g.40gb", mig_start=0),
        Grant(0, 42, 40960, False, mig_profile="3g.40gb", mig_start=4),
    ]
    done = ensure_instances(grants, local, loc, set())
    assert done == [
        "destroyed 7g.80gb@0 on device 0",
        "created 3g.40gb@0 on device 0",
        "created 3g.40gb@4 on device 0",
    ]
    assert layouts(local, loc) == {0: ["3g.40gb@0", "3g.40gb@4"]}
