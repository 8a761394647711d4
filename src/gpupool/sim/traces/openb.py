"""The Alibaba PAI GPU cluster trace (cluster-trace-gpu-v2023, "openb").

Node list columns: ``sn,cpu_milli,memory_mib,gpu,model``. Pod list columns:
``name,cpu_milli,memory_mib,num_gpu,gpu_milli`` and optionally ``gpu_spec,qos,pod_phase,
creation_time,deletion_time,scheduled_time``. ``gpu_milli`` is the per-GPU share (1000 =
whole GPU) and is meaningful for one-GPU pods; ``gpu_spec`` lists allowed GPU types
separated by ``|``.

Bad rows (missing or non-numeric fields, negative sizes, shares above a GPU) are reported with
their line numbers and skipped, or the whole file is rejected with ``strict=True``.
"""

import csv
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from gpupool.model import Device, Node, ResourceRequest, SharingMode, SpecError, Vendor
from gpupool.model.devices import catalog_entry
from gpupool.sim.traces.rows import RowError, bad_rows_error

NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
# required; gpu_spec, qos, pod_phase and the times are optional (the published multigpu*
# lists have only these five columns)
POD_COLUMNS = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
# GPU memory of the trace's models (the trace does not give it; G1-G3 are undisclosed types,
# and no openb pod asks for GPU memory, so the value only sizes shares' proportional memory).
MODEL_MEMORY_MIB = {"V100M16": 16384, "V100M32": 32768, "G1": 32768, "G2": 32768, "G3": 32768}


@dataclass(frozen=True, slots=True)
class Pod:
    name: str
    request: ResourceRequest
    gpu_milli_total: int  # num_gpu x gpu_milli: what the pod adds to the arrived workload
    created_s: int | None = None  # creation_time (the FGD protocol ignores the times)
    run_s: int | None = None  # how long it ran: deletion_time - scheduled_time (or creation)


def _rows(path: Path, columns: Iterable[str]) -> tuple[list[tuple[int, dict[str, str]]], str]:
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        header = reader.fieldnames or []
        missing = [c for c in columns if c not in header]
        if missing:
            raise SpecError(f"{path.name}: missing column(s) {', '.join(missing)}", field="header")
        return [(reader.line_num, row) for row in reader], path.name


def _int(row: dict[str, str], key: str) -> int:
    raw = (row.get(key) or "").strip()
    if not raw:
        raise ValueError(f"{key} is empty")
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{key}={raw!r} is not an integer") from None
    if value < 0:
        raise ValueError(f"{key}={value} is negative")
    return value


def load_nodes(path: str | Path, *, strict: bool = False) -> tuple[list[Node], list[RowError]]:
    """Nodes with their GPUs in ``share`` mode (openb mixes whole-GPU and sharing pods)."""
    rows, name = _rows(Path(path), NODE_COLUMNS)
    nodes: list[Node] = []
    errors: list[RowError] = []
    for line, row in rows:
        try:
            cards = _int(row, "gpu")
            model = (row.get("model") or "").strip()
            if cards and not model:
                raise ValueError("model is empty")
            entry = catalog_entry(model)
            memory = MODEL_MEMORY_MIB.get(model) or (entry.memory_mib if entry else 16384)
            sn = (row.get("sn") or "").strip()
            devices = tuple(
                Device(
                    i, model, Vendor.NVIDIA, memory, uuid=f"GPU-{sn}-{i}", mode=SharingMode.SHARE
                )
                for i in range(cards)
            )
            nodes.append(Node(sn, _int(row, "cpu_milli"), _int(row, "memory_mib"), devices))
        except (ValueError, SpecError) as exc:
            errors.append(RowError(line, str(exc)))
    _maybe_reject(name, errors, strict)
    return nodes, errors


def load_pods(path: str | Path, *, strict: bool = False) -> tuple[list[Pod], list[RowError]]:
    parsed, errors = _parse_pods(path, strict)
    return [pod for _, pod in parsed], errors


def load_pod_rows(
    path: str | Path, *, strict: bool = False
) -> tuple[list[dict[str, str]], list[RowError]]:
    """The raw CSV rows (all columns, as strings) of the pods that parse, for tools that write
    pod lists back (``simulate variants``); bad rows are skipped or rejected as for pods."""
    parsed, errors = _parse_pods(path, strict)
    return [row for row, _ in parsed], errors


def _parse_pods(
    path: str | Path, strict: bool
) -> tuple[list[tuple[dict[str, str], Pod]], list[RowError]]:
    rows, name = _rows(Path(path), POD_COLUMNS)
    parsed: list[tuple[dict[str, str], Pod]] = []
    errors: list[RowError] = []
    # pods with equal requests share one request object: replays look requests up in dicts
    # and sets per pod, and an identical key skips the field-by-field comparison
    interned: dict[ResourceRequest, ResourceRequest] = {}
    for line, row in rows:
        try:
            pod = _pod(row)
        except (ValueError, SpecError) as exc:
            errors.append(RowError(line, str(exc)))
            continue
        shared = interned.setdefault(pod.request, pod.request)
        parsed.append((row, pod if shared is pod.request else replace(pod, request=shared)))
    _maybe_reject(name, errors, strict)
    return parsed, errors


def _times(row: dict[str, str]) -> tuple[int | None, int | None]:
    """(creation, run time) when the row has times; a deletion before the start is an error."""
    if not (row.get("creation_time") or "").strip():
        return None, None
    created = _int(row, "creation_time")
    if not (row.get("deletion_time") or "").strip():
        return created, None
    deleted = _int(row, "deletion_time")
    started = _int(row, "scheduled_time") if (row.get("scheduled_time") or "").strip() else 0
    started = started or created
    if deleted < started:
        raise ValueError(f"deletion_time={deleted} is before the pod started ({started})")
    return created, deleted - started


def _pod(row: dict[str, str]) -> Pod:
    created, run = _times(row)
    cpu, mem = _int(row, "cpu_milli"), _int(row, "memory_mib")
    count, milli = _int(row, "num_gpu"), _int(row, "gpu_milli")
    spec = (row.get("gpu_spec") or "").strip() or None
    if milli > 1000:
        raise ValueError(f"gpu_milli={milli} is more than one GPU")
    if count == 0:
        request = ResourceRequest(cpu_millis=cpu, mem_mib=mem)
        return Pod(row["name"], request, 0, created, run)
    if milli == 0:
        raise ValueError(f"num_gpu={count} with gpu_milli=0")
    if milli < 1000:
        if count != 1:
            raise ValueError(f"a GPU share (gpu_milli={milli}) with num_gpu={count}")
        if milli % 10:
            raise ValueError(f"gpu_milli={milli} is finer than 1% of a GPU")
        request = ResourceRequest(
            gpu=1, gpu_model=spec, gpu_share_pct=milli // 10, cpu_millis=cpu, mem_mib=mem
        )
    else:
        request = ResourceRequest(gpu=count, gpu_model=spec, cpu_millis=cpu, mem_mib=mem)
    return Pod(row["name"], request, count * milli, created, run)


def _maybe_reject(name: str, errors: list[RowError], strict: bool) -> None:
    if strict and errors:
        raise bad_rows_error(name, errors)
