"""The DeviceClasses of driver ``gpu.gpupool.io``: what a ResourceClaim names to ask a whole
card, a MIG instance or a share; each selects by a CEL expression over the attributes the
slices publish (``kube.dra.slices``), so a claim can narrow further (``model``, ``profile``,
``island``) with its own selectors."""

from typing import Any

from gpupool.kube.dra.slices import DRIVER

CLASSES = {
    "gpu.gpupool.io": "whole",  # a whole card
    "mig.gpupool.io": "mig",  # a MIG instance (the claim's selector names its profile)
    "share.gpupool.io": "share",  # memory and compute of a shared card
}


def device_classes() -> list[dict[str, Any]]:
    return [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": name},
            "spec": {
                # old manifests' nvidia.com/gpu served from whole cards where no device plugin
                # advertises it (the alpha gate DRAExtendedResource; dropped without it)
                **({"extendedResourceName": "nvidia.com/gpu"} if mode == "whole" else {}),
                "selectors": [
                    {
                        "cel": {
                            "expression": (
                                f'device.driver == "{DRIVER}" && '
                                f'device.attributes["{DRIVER}"].mode == "{mode}"'
                            )
                        }
                    }
                ],
            },
        }
        for name, mode in CLASSES.items()
    ]
