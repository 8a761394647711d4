"""The node agent: discovery, registration, heartbeats, and running the node's workloads.

``Agent`` and ``AgentConfig`` load on first use: the per-workload shim
(``python -m gpupool.agent.shim``) imports this package too and must start fast."""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpupool.agent.agent import Agent, AgentConfig

__all__ = ["Agent", "AgentConfig"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from gpupool.agent import agent

        return getattr(agent, name)
    raise AttributeError(f"module 'gpupool.agent' has no attribute {name!r}")
