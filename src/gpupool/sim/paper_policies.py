"""Baselines as the FGD paper's simulator (hkust-adsl/kubernetes-scheduler-simulator) scores
them, so protocol replays compare with its published figures. They plug into the engine's
``Placer`` as custom policies; the engine's own policies stay as they are.
"""

import numpy as np

from gpupool.model import SliceKind
from gpupool.scheduler.policies import BestFit

MAX_SPEC_CPU = 128_000  # millicores: the simulator's normalisation constants
MAX_SPEC_GPU = 800  # percent of a GPU: the simulator's 8,000 milli-GPU (8 GPUs)


class PaperBestFit(BestFit):
    """``int((1 - 0.5 (cpu_free - cpu) / 128 cores - 0.5 (gpu_free - gpu) / 8 GPUs) * 100)``,
    higher wins, first node on ties (the simulator's min-max normalisation keeps the order).
    Absolute amounts, not fractions of the node, are what it compares."""

    name = "paper-best-fit"

    def score(self, state, ask, fe) -> np.ndarray:
        used = ask.compute_pct * ask.count if ask.kind in (SliceKind.WHOLE, SliceKind.SHARE) else 0
        cpu_left = (state.cpu_free - ask.cpu) / MAX_SPEC_CPU
        gpu_left = (state.node_compute_free - used) / MAX_SPEC_GPU
        raw = np.floor((1.0 - 0.5 * cpu_left - 0.5 * gpu_left) * 100.0)
        return np.where(fe.node_ok, -raw, np.inf)  # the engine takes the lowest score


PAPER_POLICIES = {"paper-best-fit": PaperBestFit}
