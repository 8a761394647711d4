"""Every placement policy with what it does and whether it is online: decides only from the
cluster and the jobs that have arrived (running or queued), never from jobs that have not
arrived yet. ``gpupool policies`` prints this; a policy that is not online is for research
and never in a headline figure."""

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class PolicyInfo:
    name: str
    summary: str
    online: bool
    where: str  # "server": selectable for pools and the cycle; "protocol": FGD replays only


CATALOG: tuple[PolicyInfo, ...] = (
    PolicyInfo("first-fit", "the first node that fits, its lowest free devices", True, "server"),
    PolicyInfo(
        "best-fit",
        "the node left with the least free capacity (a node-fraction score; the paper's "
        "best-fit is paper-best-fit)",
        True,
        "server",
    ),
    PolicyInfo("spread", "the emptiest node (load balance; inference replicas)", True, "server"),
    PolicyInfo(
        "topology",
        "fewest NVLink islands / PCIe switches crossed, then best-fit",
        True,
        "server",
    ),
    PolicyInfo(
        "fgd",
        "fragmentation gradient descent (Weng et al., ATC'23): the placement that least "
        "raises expected fragmentation under the workload seen so far",
        True,
        "server",
    ),
    PolicyInfo("fgd-exact", "fgd without the paper's integer node score", True, "server"),
    PolicyInfo(
        "fgd-lookahead",
        "fgd or best-fit, whichever leaves less fragmentation once the next jobs are placed "
        "too: in the server the next jobs of the real queue; in the FGD protocol (no queue) "
        "three futures of 4 requests sampled from the pods already arrived",
        True,
        "server",
    ),
    PolicyInfo(
        "auto",
        "per job kind: topology for training, spread for inference and online-inference, "
        "best-fit for dev, fgd for batch",
        True,
        "server",
    ),
    PolicyInfo("random", "the FGD paper's baseline: a random feasible node", True, "protocol"),
    PolicyInfo(
        "dot-product",
        "the paper's baseline: the node whose free vector best aligns",
        True,
        "protocol",
    ),
    PolicyInfo(
        "gpu-clustering",
        "the paper's baseline: nodes already running the same kind of GPU task",
        True,
        "protocol",
    ),
    PolicyInfo(
        "gpu-packing",
        "the paper's baseline: occupied GPUs first, then occupied nodes, then idle ones",
        True,
        "protocol",
    ),
    PolicyInfo(
        "paper-best-fit",
        "the paper's baseline: least absolute CPU and GPU left (gpupool's best-fit uses node "
        "fractions)",
        True,
        "protocol",
    ),
    PolicyInfo(
        "fgd-lookahead-clairvoyant",
        "fgd-lookahead reading the next pods of the trace before they arrive (research only: "
        "not online, never a headline figure)",
        False,
        "protocol",
    ),
)


def info(name: str) -> PolicyInfo | None:
    return next((p for p in CATALOG if p.name == name), None)
