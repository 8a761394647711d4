"""Kubernetes resource quantities (``63500m``, ``512Gi``, ``1e3``) in gpupool's units.

Kubernetes' suffixes differ from the request grammar's (a bare number is bytes, ``m`` is
milli), so objects from the API server are read with the client library's own parser.
"""

import math
from decimal import Decimal, InvalidOperation

from kubernetes.utils import parse_quantity

from gpupool.model import SpecError

_MIB = Decimal(1024 * 1024)


def quantity(value: object, what: str) -> Decimal:
    try:
        return Decimal(parse_quantity(value))
    except (ValueError, TypeError, InvalidOperation):
        raise SpecError(
            f"{what}: {value!r} is not a Kubernetes quantity", token=str(value)
        ) from None


def cpu_millis(value: object, what: str = "cpu") -> int:
    """Millicores, rounded up (a request of ``0.1`` is 100m)."""
    return math.ceil(quantity(value, what) * 1000)


def memory_mib(value: object, what: str = "memory") -> int:
    """MiB of a byte quantity, rounded up for requests."""
    return math.ceil(quantity(value, what) / _MIB)


def memory_mib_floor(value: object, what: str = "memory") -> int:
    """MiB of a byte quantity, rounded down for capacities."""
    return math.floor(quantity(value, what) / _MIB)


def count(value: object, what: str) -> int:
    """A whole count of an extended resource (``nvidia.com/gpu: 8``)."""
    q = quantity(value, what)
    if q != q.to_integral_value() or q < 0:
        raise SpecError(f"{what}: {value!r} is not a whole non-negative count", token=str(value))
    return int(q)
