"""Looking at a service replica over HTTP: its health, load and sleep (``probe``), fairly
among tenants (``probe_pool``). Used by the node's agent, which alone reaches a replica's
control port, and by the server for replicas on agents too old to read them."""
