"""A stand-in ``npu-smi`` (called where ``run_tool`` would run the real one): ``info`` is a
recorded capture; ``info -t info-vnpu``, ``set -t create-vnpu`` / ``destroy-vnpu`` keep vNPUs
per chip and print them in the layout of the reconstructed samples (tests/data/vendor). Like
the real tool, create answers "Create vnpu success" without the id, and refuses a template
whose AI Cores or AI CPUs the chip no longer has."""

from gpupool.devices.base import DiscoveryError

# AI Cores and AI CPUs per template, as Huawei documents them (the fake's own copy: the
# tests check gpupool's tables against the real tool's rules, not against themselves)
COST = {"vir03_1c_8g": (3, 1), "vir06_1c_16g": (6, 1), "vir12_3c_32g": (12, 3)}
CHIP = (24, 6)  # 910B2


def _said(message: str) -> str:
    return f"       Status : OK\n       Message : {message}\n"


class FakeNpuSmi:
    def __init__(self, info_text: str):
        self.info_text = info_text
        self.vnpus: dict[tuple[int, int], list[tuple[int, str]]] = {}
        self.commands: list[str] = []

    def __call__(self, argv: list[str], timeout_s: float = 20.0) -> str:
        self.commands.append(" ".join(argv))
        if argv[1:] == ["info"]:
            return self.info_text
        opts = dict(zip(argv[2::2], argv[3::2], strict=False))
        chip = (int(opts["-i"]), int(opts["-c"]))
        have = self.vnpus.setdefault(chip, [])
        if argv[1] == "info" and opts.get("-t") == "info-vnpu":
            return self._info(have)
        if opts.get("-t") == "create-vnpu":
            used = [COST[t] for _, t in have]
            cores, cpus = (sum(u[i] for u in used) + COST[opts["-f"]][i] for i in (0, 1))
            if cores > CHIP[0] or cpus > CHIP[1]:
                raise DiscoveryError(f"{' '.join(argv)}: exit 2: resource not enough")
            taken = {i for i, _ in have}
            ids = [chip[0] * 16 + 100 + k for k in range(8)]
            have.append((next(i for i in ids if i not in taken), opts["-f"]))
            return _said("Create vnpu success")
        if opts.get("-t") == "destroy-vnpu":
            have[:] = [(i, t) for i, t in have if i != int(opts["-v"])]
            return _said("Destroy vnpu success")
        raise AssertionError(f"fake npu-smi: unexpected {argv}")

    @staticmethod
    def _info(have: list[tuple[int, str]]) -> str:
        cores = CHIP[0] - sum(COST[t][0] for _, t in have)
        cpus = CHIP[1] - sum(COST[t][1] for _, t in have)
        rows = "".join(
            f"|  {i:<9}|  {k:<14}|  000000000000  |  0       |  {t:<20}|\n"
            for k, (i, t) in enumerate(have)
        )
        return (
            "+-------------------------------------------------------------------------------+\n"
            "| NPU resource static info as follow:                                           |\n"
            "| AICORE    Memory    AICPU    VPC    VENC    VDEC    JPEGD    JPEGE    PNGD    |\n"
            "|            GB                                                                 |\n"
            "|===============================================================================|\n"
            f"| {cores}/24  NA/NA  {cpus}/6  9/9  0/0  2/2  24/24  4/4  NA/NA |\n"
            f"| Total number of vnpu: {len(have)}                                          |\n"
            "|  Vnpu ID  |  Vgroup ID     |  Container ID  |  Status  |  Template Name       |\n"
            + rows
        )
