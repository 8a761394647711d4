"""Interactive sessions on the server (docs/interactive.md): who may open one and where it
runs (``access``). The terminals' and the agents' WebSockets are ``routes.terminals``; the
relay between them ``server.tunnels``."""
