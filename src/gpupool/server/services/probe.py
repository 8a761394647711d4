"""Health checks and load readings of replicas, over HTTP from the leader.

Every replica answers ``GET <health_path>`` with 2xx when it can serve, and exposes its load
in the Prometheus text format at ``GET /metrics``: the counter
``gpupool_replica_requests_total``, the gauge ``gpupool_replica_requests_in_flight`` and, for a
latency target, the histogram ``gpupool_replica_request_duration_seconds``. The leader reads
them (the replicas do not push): the same request that tells readiness tells load, and a
replica needs no token. A reading that cannot be parsed is reported, never raised.
"""

import time

import httpx
from prometheus_client.parser import text_string_to_metric_families

from gpupool.autoscale.reading import Reading

MAX_BODY = 1 << 20
REQUESTS = "gpupool_replica_requests"
IN_FLIGHT = "gpupool_replica_requests_in_flight"
DURATION = "gpupool_replica_request_duration_seconds"


def parse_metrics(text: str) -> Reading:
    """The replica's counters from its /metrics text; ``error`` names what was wrong."""
    reading = Reading(ready=True)
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                if sample.name == f"{REQUESTS}_total":
                    reading.requests_total = (reading.requests_total or 0.0) + sample.value
                elif sample.name == IN_FLIGHT:
                    reading.in_flight = (reading.in_flight or 0.0) + sample.value
                elif sample.name == f"{DURATION}_bucket":
                    le = float(sample.labels.get("le", "inf"))
                    reading.buckets[le] = reading.buckets.get(le, 0.0) + sample.value
    except (ValueError, TypeError, IndexError) as exc:
        reading.error = f"metrics: not the Prometheus text format ({exc})"[:300]
    return reading


def _get(client: httpx.Client, url: str, deadline: float) -> tuple[int, str]:
    """GET ``url``; a body over 1 MiB or one still trickling in at ``deadline`` is an error
    (httpx's timeouts are per read: a replica sending a byte a second would hold the check)."""
    with client.stream("GET", url) as response:
        body = b""
        for chunk in response.iter_bytes():
            body += chunk
            if len(body) > MAX_BODY:
                raise ValueError("answer larger than 1 MiB")
            if time.monotonic() > deadline:
                raise ValueError("answer too slow")
        return response.status_code, body.decode("utf-8", "replace")


def probe(endpoint: str, health_path: str, timeout: float) -> Reading:
    """Health and load of one replica at ``host:port``."""
    base = f"http://{endpoint}"
    deadline = time.monotonic() + 2 * timeout
    try:
        with httpx.Client(timeout=timeout, follow_redirects=False, trust_env=False) as client:
            status, _ = _get(client, base + health_path, deadline)
            if not 200 <= status < 300:
                return Reading(ready=False, error=f"health: HTTP {status}")
            status, text = _get(client, base + "/metrics", deadline + timeout)
    except (httpx.HTTPError, ValueError, OSError) as exc:
        return Reading(ready=False, error=f"health: {type(exc).__name__}: {exc}"[:300])
    if not 200 <= status < 300:
        return Reading(ready=True, error=f"metrics: HTTP {status}")
    return parse_metrics(text)
