"""A parked service replica's engine, put to sleep and woken by its agent (issue 49), with the
park/wake protocol vLLM's sleep mode speaks: ``POST /sleep?level=1`` (weights to host memory,
its card's memory freed), ``POST /wake_up``. The agent asks its own replica on its control
port, which nobody else reaches (``replica_watch``); it wakes it only once the jobs vacated
from its card have stopped here, and starts nothing on a card whose engine has not yet
confirmed its sleep. A replica that does not answer is asked again next round; one that has
no such endpoint (404, 405, 501) cannot park and is stopped, freeing its card (the server
replaces it as any replica that ended).

What the agent believes is checked against what the replica says (``GET /is_sleeping``, read
by ``replica_watch`` after the agent's last change): an engine found **awake while parked**
— its card lent to training — is put back to sleep and the fault reported; the third time it
is stopped (a card is never shared with training behind the platform's back). An engine
found **asleep while it should serve** is woken and the fault reported.
"""

import logging
import time

import httpx

from gpupool.agent.replica_watch import Seen, control_of
from gpupool.agent.state import Record
from gpupool.model.protocol import OrderOut

log = logging.getLogger("gpupool.agent")
TIMEOUT_S = 3.0  # a sleep or a wake that takes longer is asked again next round
NO_PROTOCOL = (404, 405, 501)
AWAKE_WHILE_PARKED_LIMIT = 3  # faults before a parked replica that keeps waking is stopped


def _ask(client: httpx.Client, rec: Record, path: str) -> bool | None:
    """True: done; False: ask again; None: the replica has no such endpoint."""
    try:
        answer = client.post(f"http://{control_of(rec)}{path}", timeout=TIMEOUT_S)
    except httpx.HTTPError as exc:
        log.warning("allocation %s: %s: %s", rec.alloc_id, path, exc)
        return False
    if answer.is_success:
        return True
    log.warning("allocation %s: %s answered %s", rec.alloc_id, path, answer.status_code)
    return None if answer.status_code in NO_PROTOCOL else False


def _set_asleep(rec: Record, asleep: bool) -> None:
    rec.asleep, rec.sleep_changed_at = asleep, time.time()


def follow(
    client: httpx.Client,
    records: dict[int, Record],
    desired: dict[int, OrderOut],
    seen: dict[int, Seen] | None = None,
) -> tuple[set[int], list[Record], list[Record], list[tuple[int, str]]]:
    """Put to sleep or wake each replica as its order says, and check the last look at it
    (``seen``) against that. Returns the devices whose engine is still to confirm its sleep
    (nothing starts on them), the records that changed, those to stop (with why, in
    ``stop_reason``) and the faults found."""
    busy: set[int] = set()
    changed: list[Record] = []
    cannot: list[Record] = []
    faults: list[tuple[int, str]] = []
    seen = seen or {}
    for alloc_id, order in desired.items():
        rec = records.get(alloc_id)
        if rec is None or rec.released:
            continue
        if order.generation > rec.generation:  # parked or woken: the same allocation, newer
            rec.generation = order.generation
            changed.append(rec)
        if rec.port is None:
            continue
        look = seen.get(alloc_id)
        fresh = look is not None and look.at > rec.sleep_changed_at
        if order.parked and rec.asleep and fresh and look is not None and look.asleep is False:
            rec.wake_faults += 1
            changed.append(rec)
            if rec.wake_faults >= AWAKE_WHILE_PARKED_LIMIT:
                rec.stop_reason = (f"found awake while parked {rec.wake_faults} times (its card "
                                   "is lent): stopped")  # fmt: skip
                faults.append((alloc_id, rec.stop_reason))
                cannot.append(rec)
                continue
            faults.append((alloc_id, "engine found awake while parked: put back to sleep"))
            _set_asleep(rec, False)  # asked to sleep again below; nothing starts meanwhile
        elif not order.parked and not rec.asleep and fresh and look is not None and look.asleep:
            faults.append((alloc_id, "engine found asleep while it should serve: woken"))
            _set_asleep(rec, True)  # woken below
        if order.parked and not rec.asleep:
            done = _ask(client, rec, "/sleep?level=1") if rec.stop_sent_at is None else False
            if done:
                _set_asleep(rec, True)
                changed.append(rec)
            else:  # (a replica being stopped holds its card until it has ended)
                busy |= set(rec.load)
                if done is None:
                    rec.stop_reason = rec.stop_reason or (
                        "parked, but it has no POST /sleep (park protocol)"
                    )
                    cannot.append(rec)
        elif not order.parked and rec.asleep:
            vacating = [a for a in order.after if a in records and a != alloc_id]
            if not vacating and _ask(client, rec, "/wake_up"):
                _set_asleep(rec, False)
                changed.append(rec)
    return busy, changed, cannot, faults
