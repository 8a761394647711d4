"""Every route of the API against another tenant's objects, by every role of a tenant
(issue 57: the attack suite grows with the product).

Tenant b owns one of everything (a job, an array, a session, a service, a quota, limits, an
idle policy, a budget, a reservation, a user with a token), each carrying the marker
``bsecret``. Tenant a's member, tenant-admin, viewer and finance user and another node's
agent then call **every operation the server's OpenAPI document lists**, aimed at b's
objects with valid bodies. None may read
a marker of b, none may succeed in changing b's objects, and b's objects are as they were
afterwards.

The table below says what each operation is and how it is aimed; an operation the server has
that the table does not name fails the test — a new route lands with its attack here."""

import json
import time

import pytest

from tests.support.cluster import ok, seed_cluster, submit

MARK = "bsecret"
PLAN = "monthly"
SERVICE, BOB = "svc-b", "bob-b"  # names are aimed at (and echoed): the marker is inside
SOON = time.time() + 86_400  # reservations a day ahead
ROLES = ("member", "tenant-admin", "viewer", "finance", "agent")
REFUSED = (401, 403, 404, 405, 409)

# what each operation is: "b" aims at b's object (refused for a's roles, nothing of b shown);
# "list" reads lists (allowed, nothing of b in them); "admin" is for admins only; "agent" for
# an agent of the node (another node's agent included: refused); "open": anyone (no secret)
KIND: dict[str, str] = {
    "GET /api/v1/advisory": "list",
    "PUT /api/v1/advisory": "admin",
    "GET /api/v1/alerts": "list",
    "GET /api/v1/alerts/rules": "list",
    "GET /api/v1/allocations": "list",
    "POST /api/v1/allocations/{alloc_id}/checkpointed": "agent",
    "POST /api/v1/allocations/{alloc_id}/logs": "agent",
    "POST /api/v1/allocations/{alloc_id}/status": "agent",
    "GET /api/v1/audit": "list",
    "GET /api/v1/billing/budgets": "list",
    "PUT /api/v1/billing/budgets/{tenant}": "b",
    "POST /api/v1/billing/credits": "b",
    "GET /api/v1/billing/invoice": "b",
    "GET /api/v1/billing/invoices": "list",
    "POST /api/v1/billing/invoices/issue": "admin",
    "GET /api/v1/billing/invoices/{invoice_id}": "b",
    "POST /api/v1/billing/plans": "b",
    "GET /api/v1/billing/plans": "list",
    "POST /api/v1/billing/plans/{plan_id}/cancel": "b",
    "GET /api/v1/billing/prices": "open",
    "PUT /api/v1/billing/prices/{model}": "admin",
    "GET /api/v1/billing/reports/{report}": "b",
    "GET /api/v1/billing/tenants/{name}": "b",
    "PUT /api/v1/billing/tenants/{name}": "b",
    "GET /api/v1/devices": "list",
    "GET /api/v1/fairshare": "list",
    "POST /api/v1/jobs": "b",
    "GET /api/v1/jobs": "list",
    "GET /api/v1/jobs/{job_id}": "b",
    "POST /api/v1/jobs/{job_id}/cancel": "b",
    "GET /api/v1/jobs/{job_id}/cost": "b",
    "GET /api/v1/jobs/{job_id}/events": "b",
    "POST /api/v1/jobs/{job_id}/hold": "b",
    "GET /api/v1/jobs/{job_id}/logs": "b",
    "POST /api/v1/jobs/{job_id}/release": "b",
    "POST /api/v1/jobs/{job_id}/requeue": "b",
    "POST /api/v1/jobs/{job_id}/notebook-link": "b",
    "GET /api/v1/jobs/{job_id}/notebook-login": "b",
    **{
        f"{m} /api/v1/jobs/{{job_id}}/notebook/{{path}}": "b"
        for m in ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")
    },
    "POST /api/v1/join": "open",
    "GET /api/v1/join-tokens": "admin",
    "POST /api/v1/join-tokens": "admin",
    "DELETE /api/v1/join-tokens/{token_id}": "admin",
    "GET /api/v1/join/ca": "open",
    "PUT /api/v1/kubernetes/nodes": "admin",
    "GET /api/v1/kubernetes/pods": "list",
    "POST /api/v1/kubernetes/pods": "admin",
    "GET /api/v1/kubernetes/policy": "list",
    "POST /api/v1/nodes": "admin",
    "GET /api/v1/overbooking": "list",
    "GET /api/v1/nodes": "list",
    "GET /api/v1/nodes/{name}": "list",
    "PATCH /api/v1/nodes/{name}": "admin",
    "DELETE /api/v1/nodes/{name}": "admin",
    "GET /api/v1/nodes/{name}/allocations": "agent",
    "POST /api/v1/nodes/{name}/drain": "admin",
    "POST /api/v1/nodes/{name}/heartbeat": "agent",
    "GET /api/v1/nodes/{name}/orders": "agent",
    "POST /api/v1/nodes/{name}/readings": "agent",
    "POST /api/v1/nodes/{name}/reconcile": "agent",
    "GET /api/v1/overview": "list",
    "GET /api/v1/overview/history": "list",
    "GET /api/v1/pools": "list",
    "PUT /api/v1/pools/{name}": "admin",
    "DELETE /api/v1/pools/{name}": "admin",
    "GET /api/v1/priority": "list",
    "GET /api/v1/priority-classes": "list",
    "PUT /api/v1/priority-classes/{name}": "admin",
    "GET /api/v1/proposals": "list",
    "POST /api/v1/proposals/{proposal_id}/approve": "admin",
    "POST /api/v1/proposals/{proposal_id}/reject": "admin",
    "GET /api/v1/queue": "list",
    "GET /api/v1/reservations": "list",
    "POST /api/v1/reservations": "admin",
    "DELETE /api/v1/reservations/{res_id}": "b",
    "POST /api/v1/services": "b",
    "GET /api/v1/services": "list",
    "GET /api/v1/services/{name}": "b",
    "DELETE /api/v1/services/{name}": "b",
    "GET /api/v1/services/{name}/endpoints": "b",
    "GET /api/v1/services/{name}/history": "b",
    "POST /api/v1/services/{name}/scale": "b",
    "GET /api/v1/sessions": "list",
    "GET /api/v1/status": "list",
    "POST /api/v1/tenants": "b",
    "GET /api/v1/tenants": "list",
    "GET /api/v1/tenants/{name}": "b",
    "DELETE /api/v1/tenants/{name}": "b",
    "GET /api/v1/tenants/{name}/limits": "b",
    "PUT /api/v1/tenants/{name}/limits": "b",
    "GET /api/v1/tenants/{name}/idle-policy": "b",
    "PUT /api/v1/tenants/{name}/idle-policy": "b",
    "PUT /api/v1/tenants/{name}/quotas/{resource}": "b",
    "DELETE /api/v1/tenants/{name}/quotas/{resource}": "b",
    "GET /api/v1/tokens": "list",
    "DELETE /api/v1/tokens/{token_id}": "b",
    "GET /api/v1/usage": "list",
    "GET /api/v1/usage/summary": "list",
    "GET /api/v1/users": "list",
    "POST /api/v1/users": "b",
    "PATCH /api/v1/users/{name}": "b",
    "POST /api/v1/users/{name}/tokens": "b",
    "GET /healthz": "open",
}

# valid bodies and queries aimed at b (a body that fails validation would hide a missing check)
BODY: dict[str, object] = {
    "PUT /api/v1/advisory": {"actions": {"preempt": True}},
    "POST /api/v1/allocations/{alloc_id}/checkpointed": {"generation": 1, "at": 1.0},
    "POST /api/v1/allocations/{alloc_id}/logs": {"stream": "stdout", "text": "forged"},
    "POST /api/v1/allocations/{alloc_id}/status": {"generation": 1, "state": "failed"},
    "PUT /api/v1/billing/budgets/{tenant}": {"monthly": "1", "action": "stop-elastic"},
    "POST /api/v1/billing/credits": {
        "tenant": "b",
        "month": "2026-12",
        "amount": "-1000",
        "reason": "x",
    },
    "POST /api/v1/billing/invoices/issue": {"month": "2026-01"},
    "POST /api/v1/billing/plans": {"tenant": "b", "model": "A100-80G", "cards": 1, "plan": PLAN},
    "PUT /api/v1/billing/prices/{model}": {"monthly": "1"},
    "PUT /api/v1/billing/tenants/{name}": {"mode": "card-hour", "discount_pct": 100},
    "POST /api/v1/jobs": {"tenant": "b", "request": "cpu=1", "command": ["true"]},
    "POST /api/v1/join-tokens": {"uses": 1},
    "PUT /api/v1/kubernetes/nodes": {"nodes": []},
    "POST /api/v1/kubernetes/pods": {"bound": [], "ended": []},
    "POST /api/v1/nodes": {"name": "evil", "cpu_millis": 1000, "memory_mib": 1024, "devices": []},
    "PATCH /api/v1/nodes/{name}": {"labels": {"x": "y"}},
    "POST /api/v1/nodes/{name}/drain": {"reason": "x"},
    "POST /api/v1/nodes/{name}/heartbeat": {"devices": []},
    "POST /api/v1/nodes/{name}/readings": {"readings": [{"alloc_id": 1, "ready": False}]},
    "POST /api/v1/nodes/{name}/reconcile": {"running": []},
    "PUT /api/v1/pools/{name}": {"name": "default", "sharing": "whole"},
    "PUT /api/v1/priority-classes/{name}": {"name": "training", "value": 1},
    "POST /api/v1/reservations": {"tenant": "a", "nodes": ["n0"], "start": SOON, "end": SOON + 60},
    "POST /api/v1/services": {
        "name": "mine",
        "tenant": "b",
        "request": "gpu=1",
        "command": ["true"],
        "target": 1,
    },
    "POST /api/v1/services/{name}/scale": {"replicas": 3},
    "POST /api/v1/tenants": {"name": "b-child", "parent": "b"},
    "PUT /api/v1/tenants/{name}/limits": {"jobs": 1},
    "PUT /api/v1/tenants/{name}/idle-policy": {"rules": {"*": {"timeout_s": 0, "warning_s": 0}}},
    "PUT /api/v1/tenants/{name}/quotas/{resource}": {"resource": "gpu", "nominal": 99},
    "POST /api/v1/users": {"name": "mallory", "role": "tenant-admin", "tenant": "b"},
    "PATCH /api/v1/users/{name}": {"disabled": True},
    "POST /api/v1/users/{name}/tokens": {},
}
QUERY: dict[str, dict[str, str]] = {
    "GET /api/v1/billing/invoice": {"tenant": "b", "month": "2026-12"},
    "GET /api/v1/billing/reports/{report}": {"tenant": "b", "month": "2026-12"},
    "GET /api/v1/services/{name}": {"tenant": "b"},
    "DELETE /api/v1/services/{name}": {"tenant": "b"},
    "GET /api/v1/services/{name}/endpoints": {"tenant": "b"},
    "GET /api/v1/services/{name}/history": {"tenant": "b"},
    "POST /api/v1/services/{name}/scale": {"tenant": "b"},
    "GET /api/v1/usage": {"tenant": "b"},
    "GET /api/v1/jobs": {"tenant": "b"},
    "GET /api/v1/queue": {"tenant": "b"},
    "GET /api/v1/sessions": {"tenant": "b"},
    "GET /api/v1/priority": {"tenant": "b"},
    "GET /api/v1/jobs/{job_id}/notebook-login": {"ticket": "gpnl_forged"},
}


def _bs(server) -> dict[str, object]:
    """b's objects, each with the marker; the path values that aim at them."""
    admin = server.admin()
    seed_cluster(admin, nodes=2, tenants={"a": 2, "b": 2})
    bob = server.token(BOB, "tenant-admin", "b")
    b = server.client(bob)
    job = submit(b, "gpu=1", name=f"job-{MARK}", env={"TOKEN": MARK},
                 command=["echo", MARK])  # fmt: skip
    submit(b, "cpu=1", name=f"array-{MARK}", array="0-3", command=["echo", MARK])
    session = {"request": "cpu=1", "allocation": True, "max_runtime_s": 600,
               "name": f"session-{MARK}"}  # fmt: skip
    ok(b.post("/api/v1/jobs", json=session), 201)
    service = {"name": SERVICE, "tenant": "b", "target": 1, "request": "gpu=1",
               "command": ["echo", MARK]}  # fmt: skip
    ok(b.post("/api/v1/services", json=service), 201)
    ok(admin.put("/api/v1/tenants/b/limits", json={"jobs": 500}))
    rule = {"timeout_s": 3600, "warning_s": 600}
    ok(admin.put("/api/v1/tenants/b/idle-policy", json={"rules": {"*": rule}}))
    ok(admin.put("/api/v1/billing/budgets/b", json={"monthly": "12345",
                                                    "action": "stop-elastic"}))  # fmt: skip
    reservation = ok(admin.post("/api/v1/reservations", json={
        "tenant": "b", "nodes": ["n1"], "start": SOON, "end": SOON + 3600}), 201)  # fmt: skip
    server.cycle()
    alloc = ok(admin.get(f"/api/v1/jobs/{job['id']}"))["allocation"]
    assert alloc is not None
    node = alloc["nodes"][0]["node"]
    tokens = ok(b.get("/api/v1/tokens"))
    token_id = (tokens["items"] if isinstance(tokens, dict) else tokens)[0]["id"]
    return {
        "job_id": job["id"], "alloc_id": alloc["id"], "tenant": "b", "node": node,
        "other": "n1" if node == "n0" else "n0",
        "name": "b", "resource": "gpu", "token_id": token_id, "res_id": reservation["id"],
        "report": "usage", "invoice_id": 1, "plan_id": 1, "proposal_id": 1, "model": "A100-80G",
        "bob": BOB, "path": "api/contents",
    }  # fmt: skip


def _path(template: str, values: dict[str, object], route: str) -> str:
    fill = dict(values)
    if route.startswith(("GET /api/v1/services/", "DELETE /api/v1/services/",
                         "POST /api/v1/services/")):  # fmt: skip
        fill["name"] = SERVICE
    elif "/users/" in route:
        fill["name"] = values["bob"]
    elif "/nodes/" in route:
        fill["name"] = values["node"]  # where b's job runs (the agent below is another's)
    elif "/pools/" in route:
        fill["name"] = "default"
    elif "/priority-classes/" in route:
        fill["name"] = "training"
    return template.format(**fill)


def _state(admin, values) -> str:
    """What a's calls must leave as it was: b's objects as the admin reads them."""
    parts = [
        ok(admin.get(f"/api/v1/jobs/{values['job_id']}"))["state"],
        ok(admin.get("/api/v1/jobs", params={"tenant": "b", "limit": 100}))["total"],
        ok(admin.get(f"/api/v1/services/{SERVICE}", params={"tenant": "b"}))["desired"],
        ok(admin.get("/api/v1/tenants/b")),
        ok(admin.get("/api/v1/tenants/b/limits")),
        ok(admin.get("/api/v1/tenants/b/idle-policy")),
        ok(admin.get("/api/v1/sessions", params={"tenant": "b"})),
        ok(admin.get("/api/v1/billing/budgets")),
        ok(admin.get("/api/v1/reservations")),
        [u for u in ok(admin.get("/api/v1/users")) if u["name"] == BOB],
    ]
    return json.dumps(parts, sort_keys=True, default=str)


@pytest.mark.parametrize("role", ROLES)
def test_no_role_of_one_tenant_reaches_anothers_objects_through_any_route(sqlite_server, role):
    server = sqlite_server
    spec = ok(server.admin().get("/openapi.json"))
    routes = {f"{m.upper()} {p}": p for p, ops in spec["paths"].items() for m in ops}
    unnamed = sorted(set(routes) - set(KIND))
    assert not unnamed, f"routes without their attack here (add them to KIND): {unnamed}"
    values = _bs(server)
    admin = server.admin()
    before = _state(admin, values)
    if role == "agent":
        other = str(values["other"])
        caller = server.client(server.token(f"agent-{other}", "agent", node=other))
    else:
        caller = server.client(server.token(f"{role}-a", role, "a"))  # finance: of team a
    leaks, changed = [], []
    for route, template in sorted(routes.items()):
        method, kind = route.split()[0], KIND[route]
        body = BODY.get(route) if method in ("POST", "PUT", "PATCH") else None
        r = caller.request(method, _path(template, values, route), params=QUERY.get(route),
                           json=body)  # fmt: skip
        if r.status_code >= 500:
            changed.append(f"{route}: {r.status_code}")
        if MARK in r.text and kind != "open":
            leaks.append(f"{role} {route}: {r.text[:200]}")
        # the bodies above are valid: a 422 comes from a check of what b's object is
        if kind in ("b", "admin", "agent") and r.status_code not in (*REFUSED, 422):
            changed.append(f"{role} {route}: {r.status_code} {r.text[:150]}")
    assert not leaks, leaks
    assert not changed, changed
    assert _state(admin, values) == before
    assert server.client(server.token("bob-check", "member", "b")).get("/api/v1/jobs").is_success
