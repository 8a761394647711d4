"""A CUDA workload for scripts/gpu-check.sh that needs only the driver (libcuda, via ctypes):
print what the job was granted and what CUDA lets it see, allocate MIB MiB in 256 MiB steps,
hold it for HOLD seconds. Exit 0 when every allocation succeeded, 3 when the driver (MPS or
HAMi-core) refused one."""

import ctypes
import os
import sys
import time


def check(lib: ctypes.CDLL, name: str, *args: object) -> int:
    return getattr(lib, name)(*args)


def main() -> int:
    want_mib, hold_s = int(sys.argv[1]), float(sys.argv[2])
    keys = ("CUDA_VISIBLE_DEVICES", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE",
            "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT", "CUDA_DEVICE_MEMORY_LIMIT")  # fmt: skip
    for key in keys:
        print(f"{key}={os.environ.get(key, '')}", flush=True)
    cuda = ctypes.CDLL("libcuda.so.1")
    dev, ctx = ctypes.c_int(), ctypes.c_void_p()
    free, total = ctypes.c_size_t(), ctypes.c_size_t()
    for step in ("cuInit", "cuDeviceGet", "cuCtxCreate_v2", "cuMemGetInfo_v2"):
        args = {
            "cuInit": (0,),
            "cuDeviceGet": (ctypes.byref(dev), 0),
            "cuCtxCreate_v2": (ctypes.byref(ctx), 0, dev),
            "cuMemGetInfo_v2": (ctypes.byref(free), ctypes.byref(total)),
        }[step]
        if (rc := check(cuda, step, *args)) != 0:
            print(f"{step} failed: CUresult {rc}", flush=True)
            return 4
    print(f"cuda sees total={total.value >> 20} MiB free={free.value >> 20} MiB", flush=True)
    got = 0
    while got < want_mib:
        ptr = ctypes.c_uint64()
        rc = check(cuda, "cuMemAlloc_v2", ctypes.byref(ptr), ctypes.c_size_t(256 << 20))
        if rc != 0:
            print(f"allocation refused at {got} MiB (CUresult {rc})", flush=True)
            time.sleep(hold_s)
            return 3
        got += 256
    print(f"allocated {got} MiB", flush=True)
    time.sleep(hold_s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
