"""The layering docs/architecture.md draws, checked on what each package really loads: the
engine, its models, the node agent and Kubernetes mode load nothing of the server (nor its
database library), so each runs, and is read, without the control plane; and no module
imports itself round a circle."""

import ast
import json
import subprocess
import sys
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

import gpupool

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


def _import_graph() -> dict[str, set[str]]:
    """Every gpupool module and the gpupool modules it imports, anywhere in its body
    (an import inside a function is a circle too, deferred)."""
    root = Path(gpupool.__file__).parent.parent
    modules = {}
    for path in (root / "gpupool").rglob("*.py"):
        name = ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
        modules[name] = path
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for a in node.names:  # `from package import submodule` names the submodule
                    sub = f"{node.module}.{a.name}"
                    found.add(sub if sub in modules else node.module)
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def test_no_module_imports_itself_round_a_circle():
    graph = _import_graph()
    assert len(graph) > 300
    try:
        list(TopologicalSorter(graph).static_order())
    except CycleError as exc:
        pytest.fail(f"an import circle: {' -> '.join(exc.args[1])}")
