"""The season's clients: submit each planned job at its time, retrying (with the same
idempotency key) while the server cannot answer, and now and then send the same message
twice; every acknowledgement and its latency are kept for the checker."""

import threading
import time
from dataclasses import dataclass, field

import httpx

from gpupool.bench.season.records import Submission
from gpupool.bench.season.schedule import PlannedJob

RETRY_S = 0.5


@dataclass
class Submitter:
    url: str
    token: str
    script: str  # the workload script's path
    records: str  # the folder the workloads write to
    repeat_every: int  # every n-th job is sent twice; 0: never
    acked: list[Submission] = field(default_factory=list)
    latencies_s: list[float] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    retries: int = 0

    def body(self, job: PlannedJob) -> dict:
        return {
            "request": f"gpu={job.cards}",
            "tenant": job.team,
            "kind": "batch",
            "command": ["python3", self.script, self.records, str(job.run_s), job.key],
            "idempotency_key": job.key,
        }

    def run(
        self, jobs: list[PlannedJob], began: float, stop: threading.Event, give_up_s: float
    ) -> None:
        headers = {"Authorization": f"Bearer {self.token}"}
        with httpx.Client(base_url=self.url, headers=headers, timeout=10) as client:
            for n, job in enumerate(jobs):
                if stop.wait(max(0.0, began + job.submit_at_s - time.time())):
                    return
                first = self._post(client, job, give_up_s, stop)
                if first is None:
                    continue
                repeats: tuple[int, ...] = ()
                if self.repeat_every and n % self.repeat_every == 0:
                    again = self._post(client, job, give_up_s, stop)
                    repeats = (again[0],) if again else ()
                self.acked.append(
                    Submission(job.key, job.team, job.cards, job.run_s, first[1], first[0], repeats)
                )

    def _post(
        self, client: httpx.Client, job: PlannedJob, give_up_s: float, stop: threading.Event
    ) -> tuple[int, float] | None:
        """(job id, acknowledged at) or None when refused or never answered."""
        deadline = time.monotonic() + give_up_s
        while not stop.is_set() and time.monotonic() < deadline:
            sent = time.perf_counter()
            try:
                r = client.post("/api/v1/jobs", json=self.body(job))
            except httpx.HTTPError:
                self.retries += 1
                stop.wait(RETRY_S)
                continue
            if r.status_code in (200, 201):
                self.latencies_s.append(time.perf_counter() - sent)
                return int(r.json()["id"]), time.time()
            if r.status_code >= 500:
                self.retries += 1
                stop.wait(RETRY_S)
                continue
            self.refused.append(f"{job.key}: {r.status_code} {r.text[:200]}")
            return None
        self.refused.append(f"{job.key}: no answer within {give_up_s:g} s")
        return None
