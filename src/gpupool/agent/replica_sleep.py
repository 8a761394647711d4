"""A parked service replica's engine, put to sleep and woken by its agent (issue 49), with the
park/wake protocol vLLM's sleep mode speaks: ``POST /sleep?level=1`` (weights to host memory,
its card's memory freed), ``POST /wake_up``. The agent asks its own replica on the port it
published (127.0.0.1 reaches it, the tenant's namespace included); it wakes it only once the
jobs vacated from its card have stopped here, and starts nothing on a card whose engine has
not yet confirmed its sleep. A replica that does not answer is asked again next round; one
that has no such endpoint (404, 405, 501) cannot park and is stopped, freeing its card (the
server replaces it as any replica that ended)."""

import logging

import httpx

from gpupool.agent.state import Record
from gpupool.model.protocol import OrderOut

log = logging.getLogger("gpupool.agent")
TIMEOUT_S = 3.0  # a sleep or a wake that takes longer is asked again next round
NO_PROTOCOL = (404, 405, 501)


def _ask(client: httpx.Client, rec: Record, path: str) -> bool | None:
    """True: done; False: ask again; None: the replica has no such endpoint."""
    try:
        answer = client.post(f"http://127.0.0.1:{rec.port}{path}", timeout=TIMEOUT_S)
    except httpx.HTTPError as exc:
        log.warning("allocation %s: %s: %s", rec.alloc_id, path, exc)
        return False
    if answer.is_success:
        return True
    log.warning("allocation %s: %s answered %s", rec.alloc_id, path, answer.status_code)
    return None if answer.status_code in NO_PROTOCOL else False


def follow(
    client: httpx.Client, records: dict[int, Record], desired: dict[int, OrderOut]
) -> tuple[set[int], list[Record], list[Record]]:
    """Put to sleep or wake each replica as its order says. Returns the devices whose engine
    is still to confirm its sleep (nothing starts on them), the records that changed and
    those that cannot sleep (to stop)."""
    busy: set[int] = set()
    changed: list[Record] = []
    cannot: list[Record] = []
    for alloc_id, order in desired.items():
        rec = records.get(alloc_id)
        if rec is None or rec.released:
            continue
        if order.generation > rec.generation:  # parked or woken: the same allocation, newer
            rec.generation = order.generation
            changed.append(rec)
        if rec.port is None:
            continue
        if order.parked and not rec.asleep:
            done = _ask(client, rec, "/sleep?level=1") if rec.stop_sent_at is None else False
            if done:
                rec.asleep = True
                changed.append(rec)
            else:  # (a replica being stopped holds its card until it has ended)
                busy |= set(rec.load)
                if done is None:
                    cannot.append(rec)
        elif not order.parked and rec.asleep:
            vacating = [a for a in order.after if a in records and a != alloc_id]
            if not vacating and _ask(client, rec, "/wake_up"):
                rec.asleep = False
                changed.append(rec)
    return busy, changed, cannot
