"""One alert mechanism for operations and billing: pure rules over facts read from the state
of record (``rules``), deduplicated alert rows with a firing/resolved state (``store``), and
signed webhook deliveries with retries (``webhook``)."""
