"""Device discovery against recorded vendor outputs (tests/data/vendor, copied from the shared
vendor samples with their provenance), including malformed ones, and the NVML backend
through a stand-in built from a recorded dump."""

from dataclasses import replace
from pathlib import Path

import pytest

from gpupool.devices import BackendUnavailable, DiscoveryError, discover
from gpupool.devices.ascend import parse_npu_smi_info
from gpupool.devices.cambricon import parse_cnmon_info
from gpupool.devices.hygon import parse_smi_json
from gpupool.devices.nvidia_nvml import NvmlBackend
from gpupool.devices.nvidia_smi import parse_list, parse_query_xml, with_mig_uuids
from gpupool.devices.simulated import load_file, simulated_backend
from gpupool.model import SharingMode, SpecError, Vendor
from tests.support.fake_nvml import FakeNvml
from tests.support.paths import A100_MIG_XML, ROOT

LOCAL = ROOT / "tests" / "data" / "vendor"
SAMPLES = LOCAL  # the recorded captures these tests read live in the repository
A100_XML = A100_MIG_XML
H100_CAPTURE = SAMPLES / "nvidia" / "nvidia-smi_capture_h100-mig_590.48.01.txt"


def _section(path: Path, command: str) -> str:
    """One command's output out of an nvidia_gpu_exporter capture file."""
    lines = path.read_text().splitlines()
    start = lines.index(f"# $ {command}") + 2
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("#####"))
    return "\n".join(lines[start:end])


# -- NVIDIA -----------------------------------------------------------------------------------
def test_nvidia_smi_xml_a100_with_mig():
    report = parse_query_xml(A100_XML.read_text())
    (gpu,) = report.devices
    assert gpu.model == "A100-80G" and gpu.vendor is Vendor.NVIDIA
    assert gpu.memory_mib == 81920 and gpu.uuid == "GPU-513536b6-7d19-9063-b049-1e69664bb298"
    assert gpu.mode is SharingMode.MIG
    # four 1g instances of 19968 MiB with 14 SMs each: the A100-80G's 1g.20gb, not 2g.20gb
    assert [m.profile for m in gpu.mig] == ["1g.20gb"] * 4
    (t,) = report.telemetry
    assert t.util_pct is None  # "N/A" in MIG mode
    assert (t.mem_used_mib, t.temp_c, t.power_w, t.healthy) == (50, 27, 67.03, True)


def test_nvidia_smi_list_names_mig_instances_of_an_h100():
    listing = parse_list(_section(H100_CAPTURE, "nvidia-smi -L"))
    assert [m[0] for m in listing[0]] == ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]
    assert listing[0][1][2] == "MIG-00000001-0000-0000-0000-000000000001"


def test_mig_uuids_join_by_instance_order():
    (gpu,) = parse_query_xml(A100_XML.read_text()).devices
    listing = {0: [("1g.20gb", j, f"MIG-x-{j}") for j in range(4)]}
    (named,) = with_mig_uuids([gpu], listing)
    assert [m.uuid for m in named.mig] == [f"MIG-x-{j}" for j in range(4)]


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("<nvidia_smi_log><gpu>", "not XML"),
        ("<html/>", "unexpected root"),
        ("<nvidia_smi_log><gpu id='1'><fb_memory_usage><total>80 MiB</total>"
         "</fb_memory_usage></gpu></nvidia_smi_log>", "no product_name"),
        ("<nvidia_smi_log><gpu id='1'><product_name>X</product_name><fb_memory_usage>"
         "<total>lots</total></fb_memory_usage></gpu></nvidia_smi_log>", "is not a number"),
    ],
)  # fmt: skip
def test_nvidia_smi_garbage_is_a_clear_error(text, fragment):
    with pytest.raises(DiscoveryError, match=fragment):
        parse_query_xml(text)


def test_nvml_backend_from_a_recorded_dump():
    report = parse_query_xml(A100_XML.read_text())
    nvml = FakeNvml(report)
    nvml.gpus[0].migs[1].processes = [(4242, 1500)]
    backend = NvmlBackend(nvml)
    (gpu,) = backend.discover()
    assert gpu.model == "A100-80G" and gpu.mode is SharingMode.MIG
    assert [(m.profile, m.start) for m in gpu.mig] == [
        ("1g.20gb", 0),
        ("1g.20gb", 2),
        ("1g.20gb", 4),
        ("1g.20gb", 6),
    ]
    (t,) = backend.telemetry()
    assert t.util_pct is None and t.mem_used_mib == 50 and t.power_w == pytest.approx(67.03)
    (p,) = backend.processes()
    assert (p.device_uuid, p.pid, p.used_mib) == (gpu.mig[1].uuid, 4242, 1500)


def test_nvml_nvlink_islands():
    report = parse_query_xml(A100_XML.read_text())
    one = report.devices[0]
    cards = [
        replace(one, local_index=i, bus_id=f"0000:0{i}:00.0", mig=(), mode=SharingMode.WHOLE)
        for i in range(3)
    ]
    report.devices = cards
    report.telemetry = report.telemetry * 3
    nvml = FakeNvml(report)
    nvml.gpus[0].links = {0: "0000:01:00.0"}
    nvml.gpus[1].links = {0: "0000:00:00.0"}
    islands = [d.island for d in NvmlBackend(nvml).discover()]
    assert islands[0] == islands[1] and islands[2] not in (islands[0],)


def test_nvml_absent_degrades_cleanly():
    with pytest.raises(BackendUnavailable, match="NVML"):
        NvmlBackend(FakeNvml(missing=True)).discover()
    # and the real binding on this machine (no driver) says the same, without a traceback
    with pytest.raises(BackendUnavailable):
        NvmlBackend().discover()


# -- Ascend -----------------------------------------------------------------------------------
def test_npu_smi_910b2c():
    r = parse_npu_smi_info((SAMPLES / "ascend/npu-smi-info_910b2c_23.0.2.1.txt").read_text())
    assert [d.model for d in r.devices] == ["Ascend910B-B2", "Ascend910B-B2"]  # 910B2C chips
    assert [d.memory_mib for d in r.devices] == [65536, 65536]
    assert [t.mem_used_mib for t in r.telemetry] == [20701, 20687]
    assert [t.power_w for t in r.telemetry] == [88.6, 99.6]
    assert r.devices[1].bus_id == "0000:19:00.0" and all(d.healthy for d in r.devices)
    (p,) = r.processes
    assert (p.device_uuid, p.pid, p.used_mib) == (r.devices[0].uuid, 124528, 17400)


def test_npu_smi_a3_two_chips_per_npu():
    r = parse_npu_smi_info((SAMPLES / "ascend/npu-smi-info_ascend910-a3_25.2.0.txt").read_text())
    assert [d.local_index for d in r.devices] == [0, 1, 2, 3]
    assert [d.uuid for d in r.devices] == ["npu0-chip0", "npu0-chip1", "npu1-chip0", "npu1-chip1"]
    assert r.telemetry[1].power_w is None  # "-" for the second chip
    assert r.telemetry[3].mem_used_mib == 10568
    assert [p.device_uuid for p in r.processes] == ["npu1-chip1"]


def test_npu_smi_310b_without_hbm_and_in_alarm():
    r = parse_npu_smi_info((SAMPLES / "ascend/npu-smi-info_310b4_23.0.0.txt").read_text())
    (d,) = r.devices
    assert d.memory_mib == 15609 and r.telemetry[0].mem_used_mib == 3628
    assert not d.healthy  # Health "Alarm"


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("npu-smi: command failed\n", "no device table"),
        ("| NPU   Name | Health | Power(W) Temp(C) |\n| 0  910B | OK | 88 51 |\n",
         "middle of an NPU"),
        ("| NPU   Name | Health | Power(W) Temp(C) |\n| 0  910B | OK | 88 51 |\n"
         "| 0 | 0000:5A:00.0 | 0  x / y |\n", "not used/total"),
    ],
)  # fmt: skip
def test_npu_smi_garbage_is_a_clear_error(text, fragment):
    with pytest.raises(DiscoveryError, match=fragment):
        parse_npu_smi_info(text)


# -- Hygon, Cambricon -------------------------------------------------------------------------
def test_rocm_smi_json_hygon_k100():
    path = SAMPLES / "hygon/rocm-smi_json_hygon-k100ai_dtk24.04.3.json"
    r = parse_smi_json(path.read_text())
    (d,) = r.devices
    assert d.vendor is Vendor.HYGON and d.memory_mib == 65520 and d.uuid == "7100fa8866904061"
    (t,) = r.telemetry
    assert (t.util_pct, t.mem_used_mib, t.temp_c, t.power_w) == (0, 2, 39.0, 80.0)


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("{not json", "not JSON"),
        ("[]", "object of cards"),
        ('{"system": {}}', "no 'cardN'"),
        ('{"card0": {"Card Vendor": "Chengdu Haiguang"}}', "no 'vram Total Memory'"),
    ],
)
def test_rocm_smi_garbage_is_a_clear_error(text, fragment):
    with pytest.raises(DiscoveryError, match=fragment):
        parse_smi_json(text)


def test_rocm_smi_of_an_amd_card_is_not_hygon():
    with pytest.raises(BackendUnavailable, match="not Hygon"):
        parse_smi_json('{"card0": {"Card Vendor": "Advanced Micro Devices, Inc. [AMD/ATI]"}}')


def test_cnmon_info_mlu370():
    r = parse_cnmon_info((LOCAL / "cambricon/cnmon-info_mlu370-x8_synthetic.txt").read_text())
    assert [d.model for d in r.devices] == ["MLU370", "MLU370"]
    assert [d.memory_mib for d in r.devices] == [24576, 24576]
    assert [(t.util_pct, t.mem_used_mib, t.temp_c, t.power_w) for t in r.telemetry] == [
        (37, 1075, 46, 71),
        (0, 2, 35, 40),
    ]


def test_cnmon_garbage_is_a_clear_error():
    with pytest.raises(DiscoveryError, match="no 'Card N'"):
        parse_cnmon_info("cnmon: error while loading shared libraries\n")
    with pytest.raises(DiscoveryError, match=r"card 0 .*Physical Memory"):
        parse_cnmon_info("Card 0\nProduct Name : MLU370-X8\n")


# -- simulated, auto-detection ----------------------------------------------------------------
def test_simulated_spec_and_yaml_example():
    backend = simulated_backend("simulated:2xA100-80G,2xT4", "n1")
    devices = backend.discover()
    assert [d.model for d in devices] == ["A100-80G", "A100-80G", "T4", "T4"]
    assert len({d.uuid for d in devices}) == 4
    config = load_file(ROOT / "examples/devices-simulated.yaml")
    sim = simulated_backend(str(ROOT / "examples/devices-simulated.yaml"), "n2").discover()
    assert len(sim) == sum(g.count for g in config.devices)
    mig = next(d for d in sim if d.mig)
    assert {(m.profile, m.start) for m in mig.mig} == {
        ("3g.40gb", 4),
        ("2g.20gb", 0),
        ("1g.10gb", 2),
    }
    backend.load[0] = 1.0
    t = backend.telemetry()
    assert t[0].util_pct >= 60 and t[1].util_pct == 0


@pytest.mark.parametrize("spec", ["0xA100", "x", "3xNOPE-9000", "2xT4,"])
def test_simulated_bad_specs(spec):
    with pytest.raises(SpecError):
        simulated_backend(f"simulated:{spec}", "n")


def test_simulated_bad_yaml(tmp_path):
    path = tmp_path / "d.yaml"
    path.write_text("devices:\n  - {model: A100-80G, count: -1}\n")
    with pytest.raises(SpecError, match=r"devices\.0\.count"):
        load_file(path)
    path.write_text("devices: [{model: A100-80G, mig: [{profile: 3g.40gb, start: 2}]}]\n")
    with pytest.raises(SpecError, match="cannot start at slice 2"):
        simulated_backend(str(path), "n")
    path.write_text("devices: [\n")
    with pytest.raises(SpecError, match="not YAML"):
        load_file(path)


class _Broken:
    name = "broken"

    def discover(self):
        raise DiscoveryError("cnmon info: no 'Card N' block")


class _Fine:
    name = "fine"

    def discover(self):
        return simulated_backend("simulated:2xT4", "x").discover()


class _Absent:
    name = "absent"

    def discover(self):
        raise BackendUnavailable("absent: not installed")


def test_auto_keeps_other_vendors_when_one_prints_garbage():
    located, inventory = discover("auto", "n", [[_Absent(), _Fine()], [_Broken()], [_Absent()]])
    assert [loc.index for loc in located] == [0, 1]
    assert inventory.backends == ["fine"]
    assert inventory.errors == ["cnmon info: no 'Card N' block"]


def test_auto_on_this_machine_finds_nothing_and_does_not_crash():
    located, inventory = discover("auto", "n")
    assert located == [] and inventory.errors == []


def test_nvml_critical_xid_marks_the_card_unhealthy_until_restart():
    report = parse_query_xml(A100_XML.read_text())
    one = report.devices[0]
    report.devices = [
        replace(one, local_index=i, uuid=f"GPU-{i}", mig=(), mode=SharingMode.WHOLE)
        for i in range(2)
    ]
    report.telemetry = report.telemetry * 2
    nvml = FakeNvml(report)
    backend = NvmlBackend(nvml)
    assert [t.healthy for t in backend.telemetry()] == [True, True]
    nvml.pending_xids = [(0, 13), (1, 79)]  # 13: the job's own fault; 79: fell off the bus
    first = backend.telemetry()
    assert [(t.healthy, t.xid) for t in first] == [(True, None), (False, 79)]
    assert [(t.healthy, t.xid) for t in backend.telemetry()] == [(True, None), (False, 79)]
