"""What a granted slice becomes at run time (environment per slice type and vendor), and the
memory watchdog's decision on a fake NVML process list."""

import pytest

from gpupool.agent.watchdog import Watched, over_limit
from gpupool.devices.base import GpuProcess
from gpupool.model import SpecError, Vendor
from gpupool.sharing.runtime_env import VISIBLE, Grant, LocalDevice, slice_env

NV = {
    0: LocalDevice(Vendor.NVIDIA, 0, "GPU-aaa"),
    1: LocalDevice(Vendor.NVIDIA, 1, "GPU-bbb"),
    2: LocalDevice(Vendor.NVIDIA, 2, "GPU-ccc", (("3g.40gb", 4, "MIG-x"), ("2g.20gb", 0, "MIG-y"))),
}


def whole(i: int) -> Grant:
    return Grant(device=i, compute_pct=100, mem_mib=81920, exclusive=True)


def test_whole_cards_by_uuid():
    env = slice_env([whole(1), whole(0)], NV)
    assert env["CUDA_VISIBLE_DEVICES"] == "GPU-aaa,GPU-bbb"
    assert env["NVIDIA_VISIBLE_DEVICES"] == env["CUDA_VISIBLE_DEVICES"]
    assert "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE" not in env and "LD_PRELOAD" not in env


def test_mig_instance_by_its_uuid():
    g = Grant(2, 43, 40192, True, "3g.40gb", 4)
    assert slice_env([g], NV)["CUDA_VISIBLE_DEVICES"] == "MIG-x"
    with pytest.raises(SpecError, match=r"no MIG instance 1g\.10gb at slice 6"):
        slice_env([Grant(2, 14, 9856, True, "1g.10gb", 6)], NV)


def test_fractional_share_gets_mps_limits():
    env = slice_env([Grant(device=1, compute_pct=30, mem_mib=20000, exclusive=False)], NV)
    assert env["CUDA_VISIBLE_DEVICES"] == "GPU-bbb"
    assert env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "30"
    assert env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=20000M"
    assert "CUDA_DEVICE_MEMORY_LIMIT" not in env  # no HAMi-core on this node


def test_fractional_share_with_hami_core():
    g = Grant(device=0, compute_pct=50, mem_mib=8192, exclusive=False)
    env = slice_env([g], NV, hami_core="/usr/local/vgpu/libvgpu.so")
    assert env["CUDA_DEVICE_MEMORY_LIMIT"] == "8192m"
    assert env["CUDA_DEVICE_MEMORY_LIMIT_0"] == "8192m"
    assert env["CUDA_DEVICE_SM_LIMIT"] == "50"
    assert env["LD_PRELOAD"] == "/usr/local/vgpu/libvgpu.so"


@pytest.mark.parametrize(
    "vendor, variable",
    [
        (Vendor.ASCEND, "ASCEND_RT_VISIBLE_DEVICES"),
        (Vendor.CAMBRICON, "MLU_VISIBLE_DEVICES"),
        (Vendor.HYGON, "HIP_VISIBLE_DEVICES"),
    ],
)
def test_other_vendors_count_in_local_indexes(vendor, variable):
    devices = {5: LocalDevice(vendor, 1, "x"), 6: LocalDevice(vendor, 3, "y")}
    env = slice_env([whole(6), whole(5)], devices)
    assert env[variable] == "1,3"
    # no NVIDIA card granted: a job's own CUDA_VISIBLE_DEVICES never shows it one
    assert env["CUDA_VISIBLE_DEVICES"] == "" and env["NVIDIA_VISIBLE_DEVICES"] == "void"
    others = [v for v in VISIBLE.values() if v != variable]
    assert all(env[v] == "" for v in others)


def test_cpu_only_job_sees_no_accelerator():
    env = slice_env([], NV)
    assert env["CUDA_VISIBLE_DEVICES"] == "" and env["NVIDIA_VISIBLE_DEVICES"] == "void"
    assert env["ASCEND_RT_VISIBLE_DEVICES"] == ""


def test_a_device_not_on_this_node_is_an_error():
    with pytest.raises(SpecError, match="device 9: not on this node"):
        slice_env([whole(9)], NV)


def test_watchdog_flags_the_tenant_over_its_grant_only():
    a = Watched(1, frozenset({100, 101}), {"GPU-aaa": 8000})
    b = Watched(2, frozenset({200}), {"GPU-aaa": 8000})
    procs = [
        GpuProcess("GPU-aaa", 100, 5000),
        GpuProcess("GPU-aaa", 101, 4000),  # a's two processes together: 9000 > 8000
        GpuProcess("GPU-aaa", 200, 7900),  # b within its grant
        GpuProcess("GPU-aaa", 999, 30000),  # not ours (another user's process)
    ]
    (v,) = over_limit([a, b], procs)
    assert (v.key, v.used_mib, v.limit_mib) == (1, 9000, 8000)
    assert "used 9000 MiB on GPU-aaa, granted 8000 MiB" in v.reason
    assert over_limit([a, b], procs, tolerance_mib=1000) == []


def test_watchdog_memory_on_a_device_not_granted():
    a = Watched(1, frozenset({100}), {"GPU-aaa": 8000})
    (v,) = over_limit([a], [GpuProcess("GPU-bbb", 100, 10)])
    assert (v.device_uuid, v.limit_mib) == ("GPU-bbb", 0)
