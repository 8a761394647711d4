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
    # east's node is not west's to report either: left out of west's report, named, while
    # the rest of west's nodes are taken (one squatted name does not block a whole cluster)
    w1 = {**NODE, "name": "w1"}
    r = west.put(f"{KUBE}/nodes", params={"cluster": "west"}, json={"nodes": [NODE, w1]})
    assert r.status_code == 200, r.text
    assert (
        r.json()["nodes"] == 1 and "node e1: mirrored from cluster 'east'" in r.json()["refused"][0]
    )
    names = [n["name"] for n in sqlite_server.admin().get("/api/v1/nodes").json()["items"]]
    assert names == ["e1", "w1"]
    for bad in ("East", "east/../x", "-east", "e" * 64):
        r = east.get(f"{KUBE}/pods", params={"cluster": bad})
        assert r.status_code == 422, bad


def test_the_unnamed_cluster_is_reported_only_by_the_token_that_first_reported_it(sqlite_server):
    """Review finding F4: the cluster reporting without a name (a server's first, single
    cluster) was anyone's: another cluster's token leaving out ``?cluster=`` wiped its nodes
    and ended its pods. Now it is the first reporting token's; an admin may still report."""
    server = sqlite_server
    admin = server.admin()
    admin.post("/api/v1/tenants", json={"name": "algo"})
    kube = server.client(server.token("kube", "kubernetes"))
    east = server.client(server.token("east", "kubernetes"))
    u1 = {**NODE, "name": "u1", "devices": [{"index": 0, "model": "A100-80G", "uuid": "G-u1"}]}
    assert kube.put(f"{KUBE}/nodes", json={"nodes": [u1]}).json()["nodes"] == 1
    for method, path, body in (("PUT", "/nodes", {"nodes": []}), ("POST", "/pods", {}),
                               ("GET", "/pods", None)):  # fmt: skip
        r = east.request(method, f"{KUBE}{path}", json=body)
        assert r.status_code == 403 and "which kube's token reports" in r.text, (path, r.text)
    # a forged owner label in a report is not taken
    forged = {**u1, "labels": {"gpupool.io/reported-by": "east"}}
    assert kube.put(f"{KUBE}/nodes", json={"nodes": [forged]}).status_code == 200
    assert east.put(f"{KUBE}/nodes", json={"nodes": []}).status_code == 403
    # an admin's report keeps who reports it
    assert admin.put(f"{KUBE}/nodes", json={"nodes": [u1]}).status_code == 200
    assert east.put(f"{KUBE}/nodes", json={"nodes": []}).status_code == 403
    names = [n["name"] for n in admin.get("/api/v1/nodes").json()["items"]]
    assert names == ["u1"]
