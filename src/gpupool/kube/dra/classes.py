"""The DeviceClasses of driver ``gpu.gpupool.io``: what a ResourceClaim names to ask a whole
card, a MIG instance or a share; each selects by a CEL expression over the attributes the
slices publish (``kube.dra.slices``), so a claim can narrow further (``model``, ``profile``,
``island``) with its own selectors."""

from typing import Any

from gpupool.kube.dra.slices import DRIVER, device_name
from gpupool.sharing import TABLES
from gpupool.sharing.mig import MigTable

CLASSES = {
    "gpu.gpupool.io": "whole",  # a whole card
    "mig.gpupool.io": "mig",  # a MIG instance (the claim's selector names its profile)
    "share.gpupool.io": "share",  # memory and compute of a shared card
}
# one class per MIG profile of the catalog, carrying the device plugin's resource name for it
# (nvidia.com/mig-3g.40gb), so old MIG manifests are served by DRA where no device plugin
# advertises them; +me profiles have no such name (a resource name has no "+")
MIG_CLASSES = {
    f"{device_name('mig', p.name)}.gpupool.io": p.name
    for t in TABLES.values()
    if isinstance(t, MigTable)
    for p in t.profiles
    if not p.media
}
EXTENDED = {  # the device plugin's resource name -> the class that serves it
    "nvidia.com/gpu": "gpu.gpupool.io",
    **{f"nvidia.com/mig-{profile}": name for name, profile in MIG_CLASSES.items()},
}


def _class(name: str, cel: str, extended: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": cel}}]}
    if extended:  # dropped by an API server without the gate DRAExtendedResource
        spec["extendedResourceName"] = extended
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": spec,
    }


def device_classes() -> list[dict[str, Any]]:
    mode = f'device.driver == "{DRIVER}" && device.attributes["{DRIVER}"].mode'
    served = {klass: resource for resource, klass in EXTENDED.items()}
    out = [_class(n, f'{mode} == "{m}"', served.get(n)) for n, m in CLASSES.items()]
    out += [
        _class(n, f'{mode} == "mig" && device.attributes["{DRIVER}"].profile == "{p}"', served[n])
        for n, p in MIG_CLASSES.items()
    ]
    return out
