"""PodGroups as Volcano and the coscheduling plugin write them: a gang's size is its
PodGroup's ``spec.minMember``, so their manifests need no gpupool annotation. Listed and
watched where the CRD exists (a cluster without Volcano answers 404: looked for again once a
minute), each change waking the scheduler, so a gang binds as soon as its PodGroup is seen;
without the watch running (``run``), read every few seconds. Pure parsing in ``sizes_from``
and ``groups_from``.

The rest of a PodGroup is honoured, refused or said not to be read, never passed over:

- ``spec.queue`` (Volcano): gpupool charges the tenant its settings map the namespace to; a
  queue is honoured when ``queues`` maps it to that same tenant (or it is ``default``), and
  otherwise the gang is refused naming it — a queue charging another tenant would let a
  namespace spend a quota not its own;
- ``spec.minResources``, ``spec.minTaskMember`` (Volcano) and ``spec.scheduleTimeoutSeconds``
  (coscheduling) are not read: gpupool places a gang's pods all together when they fit, so
  they change only when a gang starts, not where or how it runs. A Warning Event on the
  PodGroup says so, once.
"""

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from gpupool.kube.api import ApiError, KubeApi
from gpupool.kube.config import KubeConfig
from gpupool.kube.events import event_body
from gpupool.kube.watch import Reflector

log = logging.getLogger(__name__)
PATHS = (
    "/apis/scheduling.volcano.sh/v1beta1/podgroups",  # Volcano
    "/apis/scheduling.x-k8s.io/v1alpha1/podgroups",  # the coscheduling plugin
)
REFRESH_S = 5.0
ABSENT_RETRY_S = 60.0

# (namespace, name) -> minMember, or why the group is refused
GroupSizes = Mapping[tuple[str, str], int | str]
NOT_READ = ("minResources", "minTaskMember", "scheduleTimeoutSeconds")


@dataclass(frozen=True)
class GroupNote:
    """A Warning Event to write on a PodGroup: what of it gpupool does not read."""

    involved: dict[str, str]
    message: str


def _refusal(pg: Mapping[str, Any], config: KubeConfig) -> str:
    meta, spec = pg.get("metadata") or {}, pg.get("spec") or {}
    queue = spec.get("queue")
    if not queue or queue == "default":
        return ""
    ns = meta.get("namespace", "")
    tenant = config.namespaces.get(ns)
    if tenant is not None and config.queues.get(queue) == tenant:
        return ""
    return (
        f"PodGroup {meta.get('name')}: queue {queue!r}: gpupool charges the tenant namespace "
        f"{ns} maps to ({tenant or 'none'}); map queue {queue} to it under queues: in gpupool's "
        "settings, or drop spec.queue"
    )


def groups_from(
    items: Iterable[Mapping[str, Any]], config: KubeConfig
) -> tuple[dict[tuple[str, str], int | str], list[GroupNote]]:
    """Each PodGroup's minMember, or why it is refused; and the Warning Events for what of
    them gpupool does not read (by the PodGroup's UID: ``PodGroups`` writes each once)."""
    sizes: dict[tuple[str, str], int | str] = dict(sizes_from(items))
    notes: list[GroupNote] = []
    for pg in items:
        meta, spec = pg.get("metadata") or {}, pg.get("spec") or {}
        key = (meta.get("namespace", ""), meta.get("name", ""))
        if key in sizes and (refused := _refusal(pg, config)):
            sizes[key] = refused
        unread = [f for f in NOT_READ if spec.get(f)]
        if unread and meta.get("uid"):
            involved = {
                "apiVersion": str(pg.get("apiVersion", "")),
                "kind": "PodGroup",
                "namespace": key[0],
                "name": key[1],
                "uid": str(meta["uid"]),
            }
            message = (
                f"{', '.join(unread)} not read by gpupool: it places this group's pods all "
                f"together when they fit (minMember {spec.get('minMember')}), which changes "
                "when they start, not where or how they run"
            )
            notes.append(GroupNote(involved, message))
    return sizes, notes


def sizes_from(items: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], int]:
    """minMember of each PodGroup that says one (a positive integer)."""
    out: dict[tuple[str, str], int] = {}
    for pg in items:
        meta, spec = pg.get("metadata") or {}, pg.get("spec") or {}
        size = spec.get("minMember")
        if isinstance(size, int) and size > 0 and meta.get("name"):
            out[(meta.get("namespace", ""), meta["name"])] = size
    return out


class PodGroups:
    def __init__(
        self,
        api: KubeApi,
        config: KubeConfig,
        identity: str = "gpupool",
        on_change: Callable[[], None] = lambda: None,
    ):
        self.api = api
        self.config = config
        self.identity = identity
        self.on_change = on_change  # a PodGroup came, changed or went (from the watch)
        self._told: set[str] = set()  # PodGroup UIDs given their Warning Event
        self._sizes: dict[tuple[str, str], int | str] = {}
        self._read_at = 0.0
        self._absent_until: dict[str, float] = {}
        self._lock = threading.Lock()
        self._watching = threading.Event()  # run() is on: sizes come from the reflectors
        self._reflectors: dict[str, Reflector] = {}  # per CRD path found

    def run(self, stop: threading.Event) -> None:
        """Watch each CRD path that exists (one thread each); look again once a minute for
        those that do not (Volcano installed later)."""
        self._watching.set()
        threads: list[threading.Thread] = []
        while not stop.is_set():
            for path in PATHS:
                if path in self._reflectors:
                    continue
                try:
                    self.api.list(path)
                except ApiError as exc:
                    if exc.status not in (403, 404):
                        log.warning("podgroups %s: %s", path, exc)
                    continue
                except Exception as exc:  # the API away: looked for again
                    log.warning("podgroups %s: %s", path, exc)
                    continue
                reflector = Reflector(self.api, path, self.on_change)
                self._reflectors[path] = reflector
                t = threading.Thread(
                    target=reflector.run, args=(stop,), name="gpupool-kube-podgroups", daemon=True
                )
                t.start()
                threads.append(t)
            if len(self._reflectors) == len(PATHS):
                break
            stop.wait(ABSENT_RETRY_S)
        for t in threads:
            t.join()

    def synced(self, timeout_s: float) -> bool:
        """Whether every PodGroup collection found is listed (True when none is)."""
        return all(r.synced.wait(timeout_s) for r in list(self._reflectors.values()))

    def sizes(self) -> dict[tuple[str, str], int | str]:
        """The PodGroups' sizes: as watched, or read again when older than ``REFRESH_S``."""
        with self._lock:
            if self._watching.is_set():
                items = [pg for r in list(self._reflectors.values()) for pg in r.snapshot()]
                found, notes = groups_from(items, self.config)
                self._tell(notes)
                return found
            now = time.monotonic()
            if now - self._read_at >= REFRESH_S:
                self._read_at = now
                self._sizes = self._read(now)
            return self._sizes

    def _read(self, now: float) -> dict[tuple[str, str], int | str]:
        found: dict[tuple[str, str], int | str] = {}
        for path in PATHS:
            if self._absent_until.get(path, 0.0) > now:
                continue
            try:
                sizes, notes = groups_from(self.api.list(path).get("items") or [], self.config)
                found.update(sizes)
                self._tell(notes)
            except ApiError as exc:
                if exc.status in (403, 404):  # no such CRD here, or not ours to read
                    self._absent_until[path] = now + ABSENT_RETRY_S
                else:
                    log.warning("podgroups %s: %s", path, exc)
                    found.update(self._sizes)  # keep what was known
            except Exception as exc:  # the API away: keep what was known
                log.warning("podgroups %s: %s", path, exc)
                found.update(self._sizes)
        return found

    def _tell(self, notes: Iterable[GroupNote]) -> None:
        for note in notes:
            if note.involved["uid"] in self._told:
                continue
            try:
                body = event_body(note.involved, "NotRead", note.message, "Warning", self.identity)
                self.api.create_event(body)
                self._told.add(note.involved["uid"])
            except Exception as exc:  # said again at the next read
                log.warning("podgroup %s: event not written: %s", note.involved["name"], exc)
