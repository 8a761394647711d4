"""gpupool as a Kubernetes DRA driver, ``gpu.gpupool.io`` (resource.k8s.io/v1): ResourceSlices
for a node's cards, MIG placements and enforced shares, and the DeviceClasses to ask them."""
