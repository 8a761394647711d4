"""Dynamic MIG through ``nvidia-smi mig``, for nodes where NVML's Python binding cannot be
loaded: list GPU instances with their placements (``-lgi``), create one at a placement with a
compute instance over all of it (``-cgi PROFILE_ID:START -C``), destroy one (``-dci`` and then
``-dgi``, as NVML wants). The parsers are pure; a refusal or output that is not what
nvidia-smi prints is a ``MigError`` naming the card and what the tool said.

The layouts parsed are those of nvidia-smi's published captures (R470 to R590 print the same
lines); no capture of them is in tests/data yet, so docs/gpu-check.md lists the commands to
record on the next real MIG card."""

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass

from gpupool.devices.nvidia_mig import MigError

_LGI_ROW = re.compile(r"^\|\s*(\d+)\s+MIG\s+(\S+)\s+(\d+)\s+(\d+)\s+(\d+):(\d+)\s*\|$")
_CREATED_GI = re.compile(r"Successfully created GPU instance ID\s+(\d+) on GPU\s+(\d+)")
_CREATED_CI = re.compile(
    r"Successfully created compute instance ID\s+(\d+) on GPU\s+(\d+) GPU instance ID\s+(\d+)"
)


@dataclass(frozen=True, slots=True)
class GpuInstanceRow:
    """One row of ``nvidia-smi mig -lgi``."""

    gpu: int
    profile: str
    profile_id: int
    gi: int
    start: int
    size: int


@dataclass(frozen=True, slots=True)
class MigDeviceIds:
    """A MIG device of ``nvidia-smi -q -x``: its index (as ``-L`` numbers it) and the GPU and
    compute instance it is."""

    index: int
    gi: int
    ci: int


def parse_gpu_instances(text: str) -> list[GpuInstanceRow]:
    """``nvidia-smi mig -lgi``: every GPU instance; none is an empty list."""
    if "No GPU instances found" in text:
        return []
    if "GPU instances:" not in text:
        first = next((line for line in text.splitlines() if line.strip()), "")
        raise MigError(f"nvidia-smi mig -lgi: not a GPU instance table ({first[:80]!r})")
    rows = []
    for n, line in enumerate(text.splitlines(), 1):
        if not re.match(r"^\|\s*\d", line):
            continue  # borders, headers
        m = _LGI_ROW.match(line.strip())
        if m is None:
            raise MigError(f"nvidia-smi mig -lgi: line {n} is not an instance row: {line[:80]!r}")
        gpu, profile, pid, gi, start, size = m.groups()
        rows.append(GpuInstanceRow(int(gpu), profile, int(pid), int(gi), int(start), int(size)))
    return rows


def parse_created(text: str, card: int) -> int:
    """``-cgi … -C``: the new GPU instance's id, once its compute instance exists too."""
    gi = _CREATED_GI.search(text)
    ci = _CREATED_CI.search(text)
    if gi is None or ci is None or ci.group(3) != gi.group(1):
        said = text.strip().splitlines()
        raise MigError(
            f"nvidia: card {card}: nvidia-smi mig -cgi did not report a GPU instance with its "
            f"compute instance ({said[-1][:120] if said else 'no output'!r})"
        )
    return int(gi.group(1))


def parse_mig_ids(xml_text: str) -> dict[int, list[MigDeviceIds]]:
    """Per GPU (in ``-q -x`` order), its MIG devices' index and instance ids."""
    try:
        root = ET.fromstring(xml_text)
    except ET.ParseError as exc:
        raise MigError(f"nvidia-smi -q -x: not XML ({exc})") from None
    out: dict[int, list[MigDeviceIds]] = {}
    for i, gpu in enumerate(root.findall("gpu")):
        ids = []
        for m in gpu.findall("mig_devices/mig_device"):
            texts = [(m.findtext(k) or "").strip() for k in ("index", "gpu_instance_id")]
            ci = (m.findtext("compute_instance_id") or "").strip()
            if not all(t.isdigit() for t in (*texts, ci)):
                raise MigError(f"nvidia-smi -q -x: gpu {i}: a MIG device without numeric ids")
            ids.append(MigDeviceIds(int(texts[0]), int(texts[1]), int(ci)))
        out[i] = ids
    return out


def create_argv(card: int, profile_id: int, start: int) -> list[str]:
    return ["nvidia-smi", "mig", "-i", str(card), "-cgi", f"{profile_id}:{start}", "-C"]


def destroy_argvs(card: int, gi: int, ci: int) -> list[list[str]]:
    """Compute instance first: the driver refuses to destroy a GPU instance that has one."""
    base = ["nvidia-smi", "mig", "-i", str(card)]
    return [[*base, "-dci", "-gi", str(gi), "-ci", str(ci)], [*base, "-dgi", "-gi", str(gi)]]
