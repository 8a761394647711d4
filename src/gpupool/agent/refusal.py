"""An agent whose credential the server refuses (401) stops instead of retrying: a removed
node's token is revoked (``gpupool node remove``) and an expired or revoked one never works
again, while every refused call counts as a failed login of the node's address — an agent
that kept trying got its host answered 429, the ``gpupool join`` that would bring the node
back included. ``gpupool agent`` then exits with ``EXIT_REFUSED``, which the systemd unit does
not restart (``RestartPreventExitStatus``)."""

import logging

from gpupool.agent.api import AgentApiError

log = logging.getLogger("gpupool.agent")
EXIT_REFUSED = 78  # sysexits' EX_CONFIG: the agent's configuration (its token) must change


def refused(name: str, exc: AgentApiError) -> str:
    """Why agent ``name`` stops (logged as an error), from the server's refusal ``exc``."""
    why = (
        f"agent {name}: the server refuses this agent's credential ({exc}); the agent stops "
        "rather than retry (each try counts against its host as a failed login). To bring "
        "the node back: gpupool join it again, or put a new agent token in its "
        "environment file and start the agent"
    )
    log.error("%s", why)
    return why
