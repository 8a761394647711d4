"""The optional parts of gpupool and the pip extra that brings each.

The runtime install carries what the server, the agents and the CLI need; Kubernetes mode,
PostgreSQL, the ARIMA comparison and the agents benchmark come with extras
(``pip install 'gpupool[kube]'``). A command that needs a missing one says so in one line
naming the install that brings it, instead of an import traceback.
"""

from importlib import import_module
from types import ModuleType

from gpupool.model import SpecError

# top-level module -> (the extra that brings it, the package's name on PyPI)
EXTRA_OF: dict[str, tuple[str, str]] = {
    "kubernetes": ("kube", "kubernetes"),
    "grpc": ("kube", "grpcio"),
    "google.protobuf": ("kube", "protobuf"),
    "psycopg": ("postgres", "psycopg"),
    "statsmodels": ("forecast", "statsmodels"),
    "aiohttp": ("bench", "aiohttp"),
}


class MissingExtra(SpecError):
    """A command needs an optional package this install lacks."""

    def __init__(self, module: str, purpose: str):
        extra, package = EXTRA_OF[module]
        self.extra = extra
        super().__init__(
            f"{purpose} needs the Python package {package}, which this install lacks: "
            f"pip install 'gpupool[{extra}]'"
        )


def require(module: str, purpose: str) -> ModuleType:
    """Import an optional ``module`` (a key of ``EXTRA_OF``), or raise ``MissingExtra``
    saying which extra brings it. An import error from inside an installed package (a broken
    dependency of it) is not hidden behind that sentence."""
    try:
        return import_module(module)
    except ImportError as exc:
        missing = exc.name or ""
        if missing != module and not module.startswith(missing + ".") and missing:
            raise
        raise MissingExtra(module, purpose) from None


def have(module: str) -> bool:
    """Whether an optional module can be imported here."""
    try:
        require(module, "")
    except MissingExtra:
        return False
    return True
