"""REST routes under ``/api/v1``, one module per resource."""
