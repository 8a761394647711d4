"""``gpupool kube run`` and ``gpupool kube device-plugin`` as processes."""

import signal
import subprocess
import sys

import yaml

from gpupool.kube.grants import grant_of
from tests.support.agents import wait_for
from tests.support.cli import gpupool
from tests.support.kube_fixtures import CONFIG, GRANT_KEY
from tests.support.kube_objects import node_obj, pod_obj


def test_kube_run_takes_the_lease_schedules_and_stops_on_sigterm(kube, tmp_path):
    config = tmp_path / "gpupool-kube.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    key = tmp_path / "grant-key"
    key.write_text(GRANT_KEY.keys[0].decode())
    kube.apply(node_obj("n1", 8))
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpupool.cli.main", "kube", "run", "--config", str(config),
         "--kubeconfig", kube.gpupool_kubeconfig, "--identity", "replica-1",
         "--grant-key", str(key)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        kube.apply(pod_obj("p", gpus=1))
        wait_for("bound", lambda: kube.pod("team-a", "p")["spec"].get("nodeName"), timeout=30)
        lease = kube.api.request(
            "GET", "/apis/coordination.k8s.io/v1/namespaces/gpupool-system/leases/gpupool-scheduler"
        )
        assert lease["spec"]["holderIdentity"] == "replica-1"
        notes = kube.pod("team-a", "p")["metadata"]["annotations"]
        assert grant_of(kube.pod("team-a", "p"), GRANT_KEY)
        assert "gpupool.io/grant-signature" in notes  # signed with the file's key
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 0, out
    assert "stopped after 1 bindings" in out


def test_bad_settings_and_an_unreachable_api_server_are_one_clear_line(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("namespaces: {a: nobody}\n")
    r = gpupool("kube", "run", "--config", str(bad))
    assert r.returncode == 2 and "namespaces.a: unknown tenant 'nobody'" in r.stderr
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    good = tmp_path / "good.yaml"
    good.write_text("namespaces: {}\n")
    r = gpupool("kube", "run", "--config", str(good), env={"GPUPOOL_GRANT_KEY": ""})
    assert r.returncode == 2 and "no grant key: give --grant-key FILE" in r.stderr
    r = gpupool("kube", "run", "--config", str(good), env={"GPUPOOL_GRANT_KEY": "abc"})
    assert r.returncode == 2 and "shorter than 32 characters" in r.stderr
    keyed = {"GPUPOOL_GRANT_KEY": "k" * 64}
    r = gpupool("kube", "run", "--config", str(good), "--kubeconfig", str(kubeconfig), env=keyed)
    assert r.returncode == 2 and "cannot reach the API server at https://127.0.0.1:1" in r.stderr
    nowhere = str(tmp_path / "none")
    r = gpupool("kube", "run", "--config", str(good), "--kubeconfig", nowhere, env=keyed)
    assert r.returncode == 2 and "kubeconfig" in r.stderr and "Traceback" not in r.stderr
    r = gpupool("kube", "device-plugin", "--kubeconfig", str(kubeconfig))
    assert r.returncode == 2 and "NODE_NAME" in r.stderr
    r = gpupool("kube", "device-plugin", "--node", "n1", env={"GPUPOOL_GRANT_KEY": ""})
    assert r.returncode == 2 and "no grant key" in r.stderr
