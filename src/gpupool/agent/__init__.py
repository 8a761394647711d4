"""The node agent: discovery, registration, heartbeats, and running the node's workloads."""

from gpupool.agent.agent import Agent, AgentConfig

__all__ = ["Agent", "AgentConfig"]
