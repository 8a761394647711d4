"""deploy/kubernetes as the real API server sees it: every manifest is accepted, the
ConfigMap's settings parse, and the identities hold exactly the rights they need."""

import pytest
import yaml

from gpupool.kube.config import parse_config
from gpupool.kube.control_plane import DEPLOY

SCHEDULER = "system:serviceaccount:gpupool-system:gpupool-scheduler"
PLUGIN = "system:serviceaccount:gpupool-system:gpupool-device-plugin"


def allowed(
    kube, user: str, verb: str, resource: str, namespace: str = "", sub: str = "", group: str = ""
) -> bool:
    attrs = {"verb": verb, "resource": resource, "group": group}
    if namespace:
        attrs["namespace"] = namespace
    if sub:
        attrs["subresource"] = sub
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {"user": user, "groups": ["system:serviceaccounts"], "resourceAttributes": attrs},
    }
    answer = kube.api.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", review)
    return bool(answer["status"].get("allowed"))


def test_every_manifest_is_accepted_by_the_api_server(kube):
    for name in ("config.yaml", "scheduler.yaml", "device-plugin.yaml"):
        kube.apply_file(DEPLOY / name)
    got = kube.api.request(
        "GET", "/apis/apps/v1/namespaces/gpupool-system/deployments/gpupool-scheduler"
    )
    assert got["spec"]["template"]["spec"]["serviceAccountName"] == "gpupool-scheduler"
    ds = kube.api.request(
        "GET", "/apis/apps/v1/namespaces/gpupool-system/daemonsets/gpupool-device-plugin"
    )
    assert ds["spec"]["template"]["spec"]["serviceAccountName"] == "gpupool-device-plugin"
    for spec in (got["spec"]["template"]["spec"], ds["spec"]["template"]["spec"]):
        # both read the grant key from the same Secret, at the path their args give
        (volume,) = [v for v in spec["volumes"] if "secret" in v]
        assert volume["secret"]["secretName"] == "gpupool-grant-key"
        container = spec["containers"][0]
        (mount,) = [m for m in container["volumeMounts"] if m["name"] == volume["name"]]
        args = container["args"]
        assert args[args.index("--grant-key") + 1] == f"{mount['mountPath']}/key"


def test_the_shipped_settings_parse():
    docs = list(yaml.safe_load_all((DEPLOY / "config.yaml").read_text()))
    config = parse_config(yaml.safe_load(docs[0]["data"]["gpupool-kube.yaml"]))
    assert config.namespaces["nlp-serve"] == "nlp"
    assert config.tenant_tree().tenants["vision"].quotas["gpu:A100-80G"].nominal == 400


@pytest.mark.parametrize(
    ("user", "verb", "resource", "namespace", "sub", "group", "expected"),
    [
        (SCHEDULER, "watch", "nodes", "", "", "", True),
        (SCHEDULER, "list", "pods", "", "", "", True),
        (SCHEDULER, "create", "pods", "team-a", "binding", "", True),
        (SCHEDULER, "patch", "pods", "team-a", "status", "", True),
        (SCHEDULER, "delete", "pods", "team-a", "", "", True),
        (SCHEDULER, "create", "events", "team-a", "", "", True),
        (SCHEDULER, "update", "leases", "gpupool-system", "", "coordination.k8s.io", True),
        (SCHEDULER, "update", "leases", "kube-system", "", "coordination.k8s.io", False),
        (SCHEDULER, "create", "pods", "team-a", "", "", False),
        (SCHEDULER, "patch", "nodes", "", "", "", False),
        (SCHEDULER, "get", "secrets", "team-a", "", "", False),
        (SCHEDULER, "create", "pods", "team-a", "exec", "", False),
        (PLUGIN, "list", "pods", "", "", "", True),
        (PLUGIN, "patch", "nodes", "", "", "", True),
        (PLUGIN, "create", "pods", "team-a", "binding", "", False),
        (PLUGIN, "delete", "pods", "team-a", "", "", False),
        (PLUGIN, "get", "secrets", "team-a", "", "", False),
    ],
)
def test_each_identity_holds_exactly_what_it_needs(
    kube, user, verb, resource, namespace, sub, group, expected
):
    assert allowed(kube, user, verb, resource, namespace, sub, group) is expected
