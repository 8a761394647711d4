"""Health checks and load readings of replicas, over HTTP on their control port.

Every replica answers ``GET <health_path>`` with 2xx when it can serve, and exposes its load
in the Prometheus text format at ``GET /metrics``: the counter
``gpupool_replica_requests_total``, the gauge ``gpupool_replica_requests_in_flight`` and, for a
latency target, the histogram ``gpupool_replica_request_duration_seconds``. Its node's agent
reads them on ``$GPUPOOL_CONTROL_PORT``, which only it reaches (the replicas do not push): the
same request that tells readiness tells load, and a replica needs no token. A reading that
cannot be parsed is reported, never raised.
"""

import json
import time

import httpx
from prometheus_client.parser import text_string_to_metric_families

from gpupool.autoscale.reading import Reading

MAX_BODY = 1 << 20
REQUESTS = "gpupool_replica_requests"
IN_FLIGHT = "gpupool_replica_requests_in_flight"
DURATION = "gpupool_replica_request_duration_seconds"
# a vLLM server's own metrics (its OpenAI server's /metrics): finished requests, requests
# running and waiting (in flight), end-to-end latency
VLLM = {
    "requests": "vllm:request_success_total",
    "running": "vllm:num_requests_running",
    "waiting": "vllm:num_requests_waiting",
    "duration": "vllm:e2e_request_latency_seconds_bucket",
}
VLLM_IN_FLIGHT = (VLLM["running"], VLLM["waiting"])


def parse_metrics(text: str) -> Reading:
    """The replica's counters from its /metrics text; ``error`` names what was wrong. A vLLM
    server's own names are read where gpupool's are absent (``VLLM``)."""
    reading, vllm = Reading(ready=True), Reading(ready=True)
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                name = sample.name
                into = vllm if name in VLLM.values() else reading
                if name in (f"{REQUESTS}_total", VLLM["requests"]):
                    into.requests_total = (into.requests_total or 0.0) + sample.value
                elif name in (IN_FLIGHT, *VLLM_IN_FLIGHT):
                    into.in_flight = (into.in_flight or 0.0) + sample.value
                elif name in (f"{DURATION}_bucket", VLLM["duration"]):
                    le = float(sample.labels.get("le", "inf"))
                    into.buckets[le] = into.buckets.get(le, 0.0) + sample.value
    except (ValueError, TypeError, IndexError) as exc:
        reading.error = f"metrics: not the Prometheus text format ({exc})"[:300]
    if reading.requests_total is None and reading.in_flight is None and not reading.buckets:
        reading.requests_total, reading.in_flight = vllm.requests_total, vllm.in_flight
        reading.buckets = vllm.buckets
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


def sleeping(endpoint: str, timeout: float) -> bool | None:
    """What the replica's ``GET /is_sleeping`` says (vLLM's sleep mode: ``{"is_sleeping":
    true}``); None when it has no such endpoint or its answer cannot be read."""
    try:
        with httpx.Client(timeout=timeout, follow_redirects=False, trust_env=False) as client:
            deadline = time.monotonic() + 2 * timeout
            status, text = _get(client, f"http://{endpoint}/is_sleeping", deadline)
        if not 200 <= status < 300:
            return None
        said = json.loads(text).get("is_sleeping")
    except (httpx.HTTPError, ValueError, OSError, AttributeError):
        return None
    return said if isinstance(said, bool) else None


def awake(endpoint: str, timeout: float, reading: Reading) -> Reading:
    """``reading``, unless the replica says it sleeps (vLLM answers its health while asleep,
    and its completions with 503): then not ready. A replica without ``GET /is_sleeping``
    is taken at its health's word."""
    asleep = sleeping(endpoint, timeout)
    if asleep:
        return Reading(ready=False, error="asleep (is_sleeping)", asleep=True)
    reading.asleep = asleep
    return reading


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
