"""Ascend vNPUs on a node: reading a chip's vNPUs from ``npu-smi info -t info-vnpu``, binding
each granted template to a vNPU of its own (creating and destroying through ``npu-smi``), and
the environment a workload on vNPUs starts with."""

import time

import pytest

from gpupool.agent.mig_layout import MigLayoutError
from gpupool.agent.vnpu_binding import bind_vnpus
from gpupool.devices import ascend, ascend_vnpu
from gpupool.devices.ascend import AscendBackend
from gpupool.devices.ascend_vnpu import parse_info_vnpu
from gpupool.devices.base import DiscoveryError
from gpupool.devices.detect import Located
from gpupool.model import SharingMode, SpecError, Vendor
from gpupool.sharing.runtime_env import Grant, LocalDevice, local_devices, slice_env
from tests.support.agents import (  # noqa: F401 (the fixture kills leftover workloads)
    in_state,
    no_workload_outlives_its_test,
    printing_env,
    two_teams_and_a_node,
    wait_for,
)
from tests.support.cluster import ok, submit
from tests.support.fake_npu_smi import FakeNpuSmi
from tests.support.paths import DATA

DATA = DATA / "vendor" / "ascend"


def test_info_vnpu_of_a_910b3_cut_in_two():
    chip = parse_info_vnpu((DATA / "npu-smi-info-vnpu_910b3_synthetic.txt").read_text())
    assert (chip.aicore, chip.memory_gb, chip.aicpu) == ((0, 20), (0, 64), (1, 7))
    assert [(v.vnpu_id, v.slot, v.template) for v in chip.vnpus] == [
        (212, 0, "vir10_3c_32g"),
        (213, 1, "vir10_3c_32g"),
    ]
    assert chip.vnpus[0].instance().uuid == "vnpu212"


def test_info_vnpu_of_a_310p():
    chip = parse_info_vnpu((DATA / "npu-smi-info-vnpu_310p_synthetic.txt").read_text())
    assert [v.template for v in chip.vnpus] == ["vir01", "vir02", "vir04"]
    assert [v.status for v in chip.vnpus] == [1, 1, 1]


def test_a_chip_not_in_vnpu_mode_has_none():
    said = "NPU is working in SMP mode, does not support vnpu query.\n"
    chip = parse_info_vnpu(said)
    assert not chip.supported and chip.vnpus == []


@pytest.mark.parametrize(
    "text, words",
    [
        ("", "no resource line"),
        ("| AICORE Memory AICPU |\n| 30/20 0/64 1/7 |\n", "AICORE '30/20'"),
        ("| AICORE Memory AICPU |\n| x 0/64 1/7 |\n", "too few|not free/total"),
        (
            "| AICORE Memory AICPU |\n| 0/20 0/64 1/7 |\n| Total number of vnpu: 2 |\n"
            "|  Vnpu ID  |  Vgroup ID  |  Container ID  |  Status  |  Template Name  |\n"
            "|  212  |  0  |  0  |  0  |  vir10_3c_32g  |\n",
            "says 2 vNPUs but lists 1",
        ),
        (
            "| AICORE Memory AICPU |\n| 0/20 0/64 1/7 |\n"
            "|  Vnpu ID  |  Vgroup ID  |  Container ID  |  Status  |  Template Name  |\n"
            "|  garbage here |\n",
            "not a vNPU row",
        ),
    ],
)
def test_garbage_is_a_clear_error(text, words):
    with pytest.raises(DiscoveryError, match=words):
        parse_info_vnpu(text)


@pytest.fixture
def npu_smi(monkeypatch):
    fake = FakeNpuSmi((DATA / "npu-smi-info_910b2c_23.0.2.1.txt").read_text())
    monkeypatch.setattr(ascend, "run_tool", fake)
    monkeypatch.setattr(ascend_vnpu, "run_tool", fake)
    return fake


def test_discovery_reads_each_chips_vnpus(npu_smi):
    npu_smi.vnpus[(1, 0)] = [(116, "vir06_1c_16g"), (117, "vir12_3c_32g")]
    devices = AscendBackend().discover()
    assert [d.model for d in devices] == ["Ascend910B-B2", "Ascend910B-B2"]
    assert devices[0].mode is SharingMode.WHOLE and devices[0].mig == ()
    assert devices[1].mode is SharingMode.MIG
    assert [(m.profile, m.start, m.uuid, m.memory_mib) for m in devices[1].mig] == [
        ("vir06_1c_16g", 0, "vnpu116", 16384),
        ("vir12_3c_32g", 1, "vnpu117", 32768),
    ]
    assert "npu-smi info -t info-vnpu -i 1 -c 0" in npu_smi.commands


def test_discovery_survives_a_chip_that_answers_garbage(npu_smi, monkeypatch):
    def broken(argv, timeout_s=20.0):
        if "info-vnpu" in argv:
            return "| AICORE |\n| ??? |\n"
        return npu_smi(argv)

    monkeypatch.setattr(ascend_vnpu, "run_tool", broken)
    devices = AscendBackend().discover()
    assert len(devices) == 2 and all(d.mig == () for d in devices)


def _node(npu_smi):
    backend = AscendBackend()
    located = {i: Located(i, d, backend) for i, d in enumerate(backend.discover())}
    return located, local_devices(located.values())


def _grant(template: str, device: int = 0) -> Grant:
    return Grant(device, 50, 32768, True, template, 0)


def test_each_grant_gets_a_vnpu_of_its_own(npu_smi):
    npu_smi.vnpus[(0, 0)] = [(100, "vir12_3c_32g")]
    located, local = _node(npu_smi)
    first = bind_vnpus([_grant("vir12_3c_32g")], local, located, busy=set())
    assert first[0].mig_start == 0  # the idle one that was there: nothing created
    assert not any("create-vnpu" in c for c in npu_smi.commands)
    second = bind_vnpus([_grant("vir12_3c_32g")], local, located, busy={"vnpu100"})
    assert second[0].mig_start == 1  # the first is held: a second one made
    assert [m[2] for m in local[0].mig] == ["vnpu100", "vnpu101"]
    env = slice_env(first + second, local)
    assert env["ASCEND_VISIBLE_DEVICES"] == "100,101"
    assert env["ASCEND_RT_VISIBLE_DEVICES"] == "0,1"  # as the container sees them


def test_idle_vnpus_of_other_templates_make_room_and_busy_ones_never(npu_smi):
    npu_smi.vnpus[(0, 0)] = [(100, "vir06_1c_16g"), (101, "vir06_1c_16g"), (102, "vir12_3c_32g")]
    located, local = _node(npu_smi)
    # 6 + 6 + 12 = 24 cores taken; a second vir12 needs 12: both idle vir06 must go
    bound = bind_vnpus([_grant("vir12_3c_32g")], local, located, busy={"vnpu102"})
    assert bound[0].mig_start is not None
    assert sorted(t for _, t in npu_smi.vnpus[(0, 0)]) == ["vir12_3c_32g", "vir12_3c_32g"]
    with pytest.raises(MigLayoutError, match="no room for vir06_1c_16g"):
        bind_vnpus([_grant("vir06_1c_16g")], local, located, busy={"vnpu102", "vnpu100"})
    assert len(npu_smi.vnpus[(0, 0)]) == 2  # nothing held was destroyed
    # the room is held by a workload that was released and is stopping: wait, do not fail
    busy = {"vnpu102", "vnpu100"}
    assert bind_vnpus([_grant("vir06_1c_16g")], local, located, busy, stopping={"vnpu100"}) is None


def test_a_refusing_tool_fails_the_start_with_its_words(npu_smi, monkeypatch):
    located, local = _node(npu_smi)

    def refuse(argv, timeout_s=20.0):
        if "create-vnpu" in argv:
            raise DiscoveryError(f"{' '.join(argv)}: exit 2: The device is busy")
        return npu_smi(argv)

    monkeypatch.setattr(ascend_vnpu, "run_tool", refuse)
    with pytest.raises(MigLayoutError, match=r"device 0: .*The device is busy"):
        bind_vnpus([_grant("vir03_1c_8g")], local, located, busy=set())


def test_other_grants_pass_through_untouched():
    plain = Grant(0, 100, 65536, True)
    assert bind_vnpus([plain], {}, {}, set()) == [plain]


def test_a_job_never_mounts_a_device_it_was_not_granted():
    """The job's own ASCEND_VISIBLE_DEVICES is always overwritten (it would steer Ascend
    Docker Runtime's mounts), also for jobs with no Ascend device at all."""
    nv = {0: LocalDevice(Vendor.NVIDIA, 0, "GPU-a")}
    env = slice_env([Grant(0, 100, 81920, True)], nv)
    assert env["ASCEND_VISIBLE_DEVICES"] == ""
    npu = {0: LocalDevice(Vendor.ASCEND, 3, "npu3-chip0")}
    assert slice_env([Grant(0, 100, 65536, True)], npu)["ASCEND_VISIBLE_DEVICES"] == "3"
    assert slice_env([], npu)["ASCEND_VISIBLE_DEVICES"] == ""
    with pytest.raises(SpecError, match="no MIG instance vir04"):
        slice_env([Grant(0, 50, 12288, True, "vir04", 0)], npu)


def test_agents_run_vnpu_jobs_each_on_its_own_vnpu(tmp_path):
    """End to end: a real server and agent (simulated 910B3, cut into vNPUs on demand), jobs
    asking for vNPU templates; a third that does not fit waits, and runs once one ends."""
    with two_teams_and_a_node(tmp_path, devices="simulated:1xAscend910B-B3:mig") as srv:
        admin = srv.admin()
        cmd = printing_env("ASCEND_VISIBLE_DEVICES")
        a = submit(admin, "vnpu=vir10_3c_32g", "algo", command=cmd)
        b = submit(admin, "vnpu=vir05_1c_16g:2", "algo", command=cmd)
        for job in (a, b):
            wait_for("running", in_state(admin, job["id"], "running"))
        c = submit(admin, "vnpu=vir05_1c_16g", "algo", command=cmd)

        def printed(job):
            chunks = ok(admin.get(f"/api/v1/jobs/{job['id']}/logs"))["chunks"]
            return chunks and chunks[0]["text"].strip()

        ids = {wait_for("log a", lambda: printed(a)), wait_for("log b", lambda: printed(b))}
        assert ids == {"100", "101,102"}  # one vNPU each, none shared
        time.sleep(1.5)  # several cycles: the chip's 20 AI Cores are all granted
        assert ok(admin.get(f"/api/v1/jobs/{c['id']}"))["state"] == "pending"
        ok(admin.post(f"/api/v1/jobs/{b['id']}/cancel"))
        wait_for("c running", in_state(admin, c["id"], "running"), timeout=30)
        assert wait_for("log c", lambda: printed(c)) in {"101", "102"}  # an idle one, reused
        for job in (a, c):
            ok(admin.post(f"/api/v1/jobs/{job['id']}/cancel"))
