"""Set up tenants, quotas and nodes through the API, as an operator would."""

import httpx

from gpupool.client.tls import system_trust


def node_body(name: str, model: str = "A100-80G", cards: int = 4, **extra: object) -> dict:
    return {
        "name": name,
        "cpu_millis": 64000,
        "memory_mib": 512 * 1024,
        "devices": [
            {"index": i, "model": model, "uuid": f"GPU-{name}-{i}", "island": 0}
            for i in range(cards)
        ],
        **extra,
    }


def ok(resp: httpx.Response, status: int = 200) -> dict:
    assert resp.status_code == status, resp.text
    return resp.json() if resp.content else {}


def seed_cluster(
    admin: httpx.Client,
    nodes: int = 2,
    cards: int = 4,
    tenants: dict[str, float] | None = None,
) -> None:
    """``nodes`` servers of ``cards`` A100-80G each; tenants with their guaranteed cards."""
    tenants = {"algo": 4, "infer": 2, "dev": 2} if tenants is None else tenants
    for i in range(nodes):
        ok(admin.post("/api/v1/nodes", json=node_body(f"n{i}", cards=cards)))
    for name, cards_ in tenants.items():
        ok(admin.post("/api/v1/tenants", json={"name": name}), 201)
        quota = {"resource": "gpu", "nominal": cards_}
        ok(admin.put(f"/api/v1/tenants/{name}/quotas/gpu", json=quota))


def submit(client: httpx.Client, request: str, tenant: str | None = None, **extra) -> dict:
    body = {"request": request, "command": ["true"], **extra}
    if tenant is not None:
        body["tenant"] = tenant
    return ok(client.post("/api/v1/jobs", json=body), 201)


def pool_with_a_node(
    admin: httpx.Client, pool: str, sharing: str, node: str, modes: list[str]
) -> None:
    """A pool of one node whose A100-80G cards report ``modes`` (whole, share, mig)."""
    ok(admin.put(f"/api/v1/pools/{pool}", json={"name": pool, "sharing": sharing}))
    body = node_body(node, cards=len(modes), pool=pool)
    for device, mode in zip(body["devices"], modes, strict=True):
        device["mode"] = mode
    ok(admin.post("/api/v1/nodes", json=body))


def team(admin: httpx.Client, name: str, cards: float) -> None:
    """A top-level tenant with ``cards`` guaranteed cards."""
    ok(admin.post("/api/v1/tenants", json={"name": name}), 201)
    ok(admin.put(f"/api/v1/tenants/{name}/quotas/gpu", json={"resource": "gpu", "nominal": cards}))


def seed_client(url: str, token: str, nodes: int, cards: int, tenants: list[str]) -> httpx.Client:
    c = httpx.Client(
        base_url=url,
        headers={"Authorization": f"Bearer {token}"},
        timeout=30,
        verify=system_trust(),
    )
    for i in range(nodes):
        assert c.post("/api/v1/nodes", json=node_body(f"n{i}", cards=cards)).status_code == 200
    for t in tenants:
        assert c.post("/api/v1/tenants", json={"name": t}).status_code == 201
        quota = {"resource": "gpu", "nominal": nodes * cards / len(tenants)}
        assert c.put(f"/api/v1/tenants/{t}/quotas/gpu", json=quota).status_code == 200
    return c


def started(client: httpx.Client, job: dict | int, at: float | None = None) -> dict:
    """Report, as its nodes' agents would, that the job's workload started on each of its
    nodes at ``at`` (epoch seconds; default: when it was granted, a workload that started at
    once): it is metered from then. Returns its allocation as the server then shows it."""
    job_id = job if isinstance(job, int) else job["id"]
    alloc = ok(client.get(f"/api/v1/jobs/{job_id}"))["allocation"]
    start = alloc["created_at"] if at is None else at
    for part in alloc["nodes"]:
        body = {"generation": alloc["generation"], "state": "running", "node": part["node"]}
        path = f"/api/v1/allocations/{alloc['id']}/status"
        ok(client.post(path, json={**body, "started_at": start}))
    return ok(client.get(f"/api/v1/jobs/{job_id}"))["allocation"]
