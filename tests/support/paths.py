"""Where the repository's files are, for tests in any tier's folder."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
DATA = TESTS / "data"  # recorded inputs: vendor tools' outputs, corpora, trace excerpts
VENDOR = DATA / "vendor"
EXAMPLES = ROOT / "examples"
A100_MIG_XML = (
    VENDOR / "nvidia" / "nvidia-smi-q-x_a100-sxm4-80gb-mig.xml"
)  # a recorded nvidia-smi -q -x
