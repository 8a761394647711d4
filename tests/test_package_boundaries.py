"""The layering docs/architecture.md draws, checked on what each package really loads: the
engine, its models, the node agent and Kubernetes mode load nothing of the server (nor its
database library), so each runs, and is read, without the control plane."""

import json
import subprocess
import sys

import pytest

PURE = ("gpupool.model", "gpupool.sharing", "gpupool.scheduler", "gpupool.autoscale")
APART = ("gpupool.agent.agent", "gpupool.kube.scheduler", "gpupool.kube.ledger")


def _loaded(module: str) -> list[str]:
    code = (
        "import importlib, json, sys, pkgutil\n"
        f"m = importlib.import_module({module!r})\n"
        "for info in pkgutil.walk_packages(getattr(m, '__path__', []), m.__name__ + '.'):\n"
        "    importlib.import_module(info.name)\n"
        "print(json.dumps(sorted(sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    return json.loads(out.stdout)


@pytest.mark.parametrize("package", PURE + APART)
def test_loads_nothing_of_the_server(package):
    loaded = _loaded(package)
    server = [m for m in loaded if m == "gpupool.server" or m.startswith("gpupool.server.")]
    assert server == [], f"{package} loads {server[:5]}"
    if package in PURE:  # the engine: no database, web or network library either
        io = [m for m in loaded if m.split(".")[0] in ("sqlalchemy", "fastapi", "httpx")]
        assert io == [], f"{package} loads {io[:5]}"
