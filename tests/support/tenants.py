"""Two tenants' real jobs on a root agent's node: the tenants, a work folder their Unix users
can reach, and a job's log as text."""

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.support.cluster import ok


def alpha_and_beta(admin: httpx.Client, cards: float) -> httpx.Client:
    """Top-level tenants alpha and beta with ``cards`` guaranteed cards each."""
    for team in ("alpha", "beta"):
        ok(admin.post("/api/v1/tenants", json={"name": team}), 201)
        quota = {"resource": "gpu", "nominal": cards}
        ok(admin.put(f"/api/v1/tenants/{team}/quotas/gpu", json=quota))
    return admin


def job_log(admin: httpx.Client, job_id: int) -> str:
    return "".join(c["text"] for c in admin.get(f"/api/v1/jobs/{job_id}/logs").json()["chunks"])


@pytest.fixture
def work_root() -> Iterator[Path]:
    """Workloads' folders under /var/tmp (tenant users cannot reach pytest's tmp_path)."""
    path = Path(tempfile.mkdtemp(prefix="gpupool-test-work-", dir="/var/tmp"))
    yield path
    shutil.rmtree(path, ignore_errors=True)
