"""Several Kubernetes clusters reporting to one server: one cluster's token cannot report as
another, so it cannot replace its nodes, end its pods or read its view (a real server)."""

NODE = {"name": "e1", "cpu_millis": 1000, "memory_mib": 1024, "devices": []}
KUBE = "/api/v1/kubernetes"


def test_a_clusters_token_cannot_report_as_another_cluster(sqlite_server):
    east = sqlite_server.client(sqlite_server.token("east", "kubernetes"))
    west = sqlite_server.client(sqlite_server.token("west", "kubernetes"))
    as_east = {"cluster": "east"}
    assert east.put(f"{KUBE}/nodes", params=as_east, json={"nodes": [NODE]}).status_code == 200
    for method, path, body in (("PUT", "/nodes", {"nodes": []}), ("POST", "/pods", {}),
                               ("GET", "/pods", None), ("GET", "/policy", None)):  # fmt: skip
        r = west.request(method, f"{KUBE}{path}", params=as_east, json=body)
        assert r.status_code == 403 and "reports as cluster 'east'" in r.text, (path, r.text)
    # reporting without a name touches only the unnamed cluster's nodes
    assert west.put(f"{KUBE}/nodes", json={"nodes": []}).status_code == 200
    assert (
        west.put(f"{KUBE}/nodes", params={"cluster": "west"}, json={"nodes": []}).status_code == 200
    )
    names = [n["name"] for n in sqlite_server.admin().get("/api/v1/nodes").json()["items"]]
    assert names == ["e1"]
    # east's node is not west's to report either
    r = west.put(f"{KUBE}/nodes", params={"cluster": "west"}, json={"nodes": [NODE]})
    assert r.status_code == 409 and "mirrored from cluster 'east'" in r.text
    for bad in ("East", "east/../x", "-east", "e" * 64):
        r = east.get(f"{KUBE}/pods", params={"cluster": bad})
        assert r.status_code == 422, bad
