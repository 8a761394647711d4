"""Node labels with a meaning to gpupool itself."""

# where a node's workloads are reached over the network (service replicas' endpoints); a node
# without it is reached by its name
ADDRESS_LABEL = "gpupool.io/address"
