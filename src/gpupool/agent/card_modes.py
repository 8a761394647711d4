"""Hybrid pools on the node: the server orders a card into MIG mode or out of it (to be
shared) once nothing runs there; the agent destroys the card's idle MIG instances, switches
MIG mode through the device backend (NVML, nvidia-smi, or the simulated backend) and reports
the new mode in its heartbeat. A card that cannot switch (the driver wants a GPU reset, the
backend cannot do it) keeps its mode, and the heartbeat says why, once, until the agent
restarts: it is not tried again every round."""

import logging
from dataclasses import dataclass, field, replace

from gpupool.devices.base import MigModeControl
from gpupool.devices.detect import Located
from gpupool.model import SharingMode
from gpupool.sharing.runtime_env import LocalDevice

log = logging.getLogger("gpupool.agent")


@dataclass
class CardModes:
    """What this agent switched (reported as the card's ``mode``) and what it could not."""

    now: dict[int, str] = field(default_factory=dict)  # node-wide index -> mode
    failed: dict[int, str] = field(default_factory=dict)  # index -> why, for the heartbeat

    def apply(
        self,
        wanted: dict[int, str],
        located: dict[int, Located],
        local: dict[int, LocalDevice],
        busy: set[int],
    ) -> list[str]:
        """Switch each ordered card nothing of ours runs on; ``located`` and ``local`` are
        updated in place. Returns what was done, for the log and the tests."""
        done = []
        for index, mode in sorted(wanted.items()):
            loc = located.get(index)
            if loc is None or index in busy or index in self.failed:
                continue
            if self.now.get(index, _mode_of(loc)) == mode:
                continue
            try:
                self._switch(loc, local, mode)
            except Exception as exc:  # a refusal fails this switch, never the agent
                self.failed[index] = f"cannot switch to {mode}: {exc}"[:300]
                log.warning("agent: device %s: %s", index, self.failed[index])
                continue
            on = mode == "mig"
            device = replace(loc.device, mode=SharingMode.MIG if on else SharingMode.WHOLE, mig=())
            located[index] = replace(loc, device=device)
            self.now[index] = mode
            done.append(f"device {index} -> {mode}")
            log.info("agent: device %s switched to %s", index, mode)
        return done

    @staticmethod
    def _switch(loc: Located, local: dict[int, LocalDevice], mode: str) -> None:
        backend = loc.backend
        if not isinstance(backend, MigModeControl):
            name = getattr(backend, "name", "device")
            raise RuntimeError(f"the {name} backend cannot switch MIG mode")
        dev = local[loc.index]
        for _profile, _start, uuid in dev.mig:  # idle: nothing of ours runs on the card
            backend.destroy_mig(loc.device.local_index, uuid)
        local[loc.index] = replace(dev, mig=())
        backend.set_mig_mode(loc.device.local_index, mode == "mig")

    def report(self, entry: dict) -> None:
        """Add the card's switched mode, or why it could not switch, to its telemetry."""
        index = entry["index"]
        if index in self.now:
            entry["mode"] = self.now[index]
        if index in self.failed:
            entry["mode_error"] = self.failed[index]


def _mode_of(loc: Located) -> str:
    return "mig" if loc.device.mode is SharingMode.MIG else "share"
