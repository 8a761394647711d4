"""A stand-in ``nvidia-smi`` over the NVML stand-in's driver state (the tool and the library
read the same driver): ``-q -x`` is the recorded dump with its MIG devices replaced by the
state's, ``-L`` and ``mig -lgi`` are printed in the layout of nvidia-smi's published captures,
``mig -cgi/-dci/-dgi`` go through the stand-in's NVML rules. A refusal fails like
``run_tool`` fails: a ``DiscoveryError`` with the command, its exit status and last line."""

import xml.etree.ElementTree as ET

from gpupool.devices.base import DiscoveryError
from gpupool.sharing.mig import table_for
from tests.support.fake_nvml import FakeNvml, NVMLError, _Placement, model_of

SM_PER_SLICE = 14  # A100


class FakeSmi:
    def __init__(self, nvml: FakeNvml, xml_text: str):
        self.nvml = nvml
        self.xml_text = xml_text
        self.commands: list[str] = []

    def __call__(self, argv: list[str]) -> str:
        self.commands.append(" ".join(argv))
        if argv[1:] == ["-q", "-x"]:
            return self._xml()
        if argv[1:] == ["-L"]:
            return self._list()
        if argv[1:] == ["mig", "-lgi"]:
            return self._lgi()
        if argv[1] == "-i" and argv[3] == "-mig":
            h = self.nvml.gpus[int(argv[2])]
            try:
                self.nvml.nvmlDeviceSetMigMode(h, int(argv[4]))
            except NVMLError as exc:
                said = f"Unable to set MIG mode for GPU {h.bus}: {exc}"
                raise DiscoveryError(f"{' '.join(argv)}: exit 2: {said}") from None
            return f"{'Enabled' if argv[4] == '1' else 'Disabled'} MIG Mode for GPU {h.bus}.\n"
        if argv[1] == "mig" and argv[2] == "-i":
            h = self.nvml.gpus[int(argv[3])]
            try:
                return self._order(int(argv[3]), h, argv[4:])
            except NVMLError as exc:
                said = f"Unable to {argv[4]} on GPU {argv[3]}: {exc}"
                raise DiscoveryError(f"{' '.join(argv)}: exit 2: {said}") from None
        raise AssertionError(f"the stand-in does not know {argv}")

    def _profiles(self, h) -> dict:
        return {p.profile_id: p for p in table_for(model_of(h)).profiles}

    def _xml(self) -> str:
        root = ET.fromstring(self.xml_text)
        for gpu, h in zip(root.findall("gpu"), self.nvml.gpus, strict=False):
            current = gpu.find("mig_mode/current_mig")
            if current is not None:
                current.text = "Enabled" if h.mig_on else "Disabled"
            devices = gpu.find("mig_devices")
            if devices is None:
                continue
            for old in list(devices):
                devices.remove(old)
            profiles = self._profiles(h)
            for j, m in enumerate(h.migs):
                d = ET.SubElement(devices, "mig_device")
                ET.SubElement(d, "index").text = str(j)
                ET.SubElement(d, "gpu_instance_id").text = str(m.gi)
                ET.SubElement(d, "compute_instance_id").text = "0"
                shared = ET.SubElement(ET.SubElement(d, "device_attributes"), "shared")
                sms = profiles[m.profile_id].compute_slices * SM_PER_SLICE
                ET.SubElement(shared, "multiprocessor_count").text = str(sms)
                memory = ET.SubElement(d, "fb_memory_usage")
                ET.SubElement(memory, "total").text = f"{m.memory_mib} MiB"
        return ET.tostring(root, encoding="unicode")

    def _list(self) -> str:
        lines = []
        for i, h in enumerate(self.nvml.gpus):
            lines.append(f"GPU {i}: {h.name} (UUID: {h.uuid})")
            profiles = self._profiles(h) if h.mig_on else {}
            for j, m in enumerate(h.migs):
                name = profiles[m.profile_id].name
                lines.append(f"  MIG {name:<13} Device {j:>2}: (UUID: {m.uuid})")
        return "\n".join(lines) + "\n"

    def _lgi(self) -> str:
        rule = "+" + "-" * 51 + "+"
        out = [
            rule,
            "| GPU instances:                                    |",
            "| GPU   Name             Profile  Instance   Placement  |",
            "|                          ID       ID       Start:Size |",
            "|" + "=" * 51 + "|",
        ]
        rows = 0
        for i, h in enumerate(self.nvml.gpus):
            profiles = self._profiles(h) if h.mig_on else {}
            for m in sorted(h.migs, key=lambda m: m.gi):
                p = profiles[m.profile_id]
                place = f"{m.start}:{p.size}"
                out.append(
                    f"|  {i:>2}  MIG {p.name:<13} {p.profile_id:>3} {m.gi:>8} {place:>10}     |"
                )
                out.append(rule)
                rows += 1
        if not rows:
            return "No GPU instances found: Not Found\n"
        return "\n".join(out) + "\n"

    def _order(self, card: int, h, args: list[str]) -> str:
        nv = self.nvml
        if args[0] == "-cgi" and args[2:] == ["-C"]:
            profile_id, start = (int(x) for x in args[1].split(":"))
            placement = _Placement()
            placement.start, placement.size = start, self._profiles(h)[profile_id].size
            gi = nv.nvmlDeviceCreateGpuInstanceWithPlacement(h, profile_id, placement)
            nv.nvmlGpuInstanceCreateComputeInstance(gi, 0)
            name = self._profiles(h)[profile_id].name
            return (
                f"Successfully created GPU instance ID {gi.gi:>2} on GPU {card:>2} using profile "
                f"MIG {name} (ID {profile_id:>2})\n"
                f"Successfully created compute instance ID  0 on GPU {card:>2} GPU instance ID "
                f"{gi.gi:>2} using profile MIG {name} (ID  0)\n"
            )
        gi = next((m for m in h.migs if m.gi == int(args[2])), None)
        if gi is None:
            raise NVMLError("Not Found")
        if args[0] == "-dci":
            nv.nvmlComputeInstanceDestroy(("ci", gi))
            return (
                f"Successfully destroyed compute instance ID  0 from GPU {card:>2} GPU instance "
                f"ID {gi.gi:>2}\n"
            )
        if args[0] == "-dgi":
            nv.nvmlGpuInstanceDestroy(gi)
            return f"Successfully destroyed GPU instance ID {gi.gi:>2} from GPU {card:>2}\n"
        raise AssertionError(f"the stand-in does not know {args}")
