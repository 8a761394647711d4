"""The shared vocabulary: nodes, devices, requests and jobs. Imports no other gpupool layer."""

from gpupool.model.devices import (
    CATALOG,
    Device,
    DeviceModel,
    Node,
    SharingMode,
    Vendor,
    canonical_model,
    make_devices,
    model_matches,
)
from gpupool.model.errors import SpecError
from gpupool.model.job import DEFAULT_PRIORITY_CLASSES, Job, JobKind, job
from gpupool.model.request import (
    NETWORK_LEVELS,
    ResourceRequest,
    SliceKind,
    Topology,
    parse_request,
    request_from_mapping,
)
from gpupool.model.units import parse_cpu_millis, parse_memory_mib, parse_share_percent

__all__ = [
    "CATALOG",
    "DEFAULT_PRIORITY_CLASSES",
    "NETWORK_LEVELS",
    "Device",
    "DeviceModel",
    "Job",
    "JobKind",
    "Node",
    "ResourceRequest",
    "SharingMode",
    "SliceKind",
    "SpecError",
    "Topology",
    "Vendor",
    "canonical_model",
    "job",
    "make_devices",
    "model_matches",
    "parse_cpu_millis",
    "parse_memory_mib",
    "parse_request",
    "parse_share_percent",
    "request_from_mapping",
]
