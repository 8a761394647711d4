"""The control plane: state of record (database), REST API, auth, audit, metrics, and the
scheduler loop that joins the pure engine to the database (DESIGN.md, platform layer)."""
