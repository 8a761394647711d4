"""Where the figures' data is: the openb trace (with the paper's ``published-results.csv``)
and ServeGen's request rates. Neither ships with gpupool; the figures that need one are
reported "not computed" where it is absent, saying what to set."""

import os
from dataclasses import dataclass
from pathlib import Path

from gpupool.sim.published import FILE as PUBLISHED
from gpupool.sim.traces.default_trace import ENV as OPENB_ENV
from gpupool.sim.traces.default_trace import candidates, default_openb
from gpupool.sim.traces.servegen import ENV as SERVEGEN_ENV

REQUIRE_ENV = "GPUPOOL_REQUIRE_FIGURES"  # set (CI): a figure not computed fails the gate
SERVEGEN_MODEL = "m-large"  # the trace whose Harvest@99 table the gate recomputes


@dataclass(frozen=True)
class Sources:
    """Paths found, or why not (the message a figure that needs it carries)."""

    openb: Path | None  # the folder of the node list and pod lists
    openb_missing: str = ""
    published: Path | None = None  # the paper's results beside the pod lists
    servegen: Path | None = None  # ServeGen's data/language folder
    servegen_missing: str = ""


def find_sources(cwd: Path | None = None) -> Sources:
    try:
        _, pods = default_openb(None, None)
        openb: Path | None = pods.parent
        openb_missing = ""
    except FileNotFoundError:
        looked = ", ".join(str(p) for p in candidates())
        openb, openb_missing = None, f"not computed: set {OPENB_ENV} (no openb trace in {looked})"
    published = openb / PUBLISHED if openb and (openb / PUBLISHED).is_file() else None
    servegen, servegen_missing = _servegen(cwd or Path.cwd())
    return Sources(openb, openb_missing, published, servegen, servegen_missing)


def _servegen(cwd: Path) -> tuple[Path | None, str]:
    """``$GPUPOOL_SERVEGEN_DIR``, else ``../shared/data/servegen/language`` beside the working
    directory or the source tree (as the openb trace is found)."""
    tree = Path(__file__).resolve().parents[4]
    places = [Path(os.environ[SERVEGEN_ENV])] if os.environ.get(SERVEGEN_ENV) else []
    for root in dict.fromkeys((cwd, tree)):
        places.append(root.parent / "shared" / "data" / "servegen" / "language")
    for place in places:
        if (place / SERVEGEN_MODEL).is_dir():
            return place, ""
    looked = ", ".join(str(p) for p in places)
    return None, f"not computed: set {SERVEGEN_ENV} (no {SERVEGEN_MODEL} folder in {looked})"


def required() -> bool:
    return os.environ.get(REQUIRE_ENV, "") not in ("", "0")
