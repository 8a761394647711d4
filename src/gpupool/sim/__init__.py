"""Trace replay and capacity planning, driving the same scheduler code as the server."""
