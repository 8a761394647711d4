"""Group commit on a real SQLite file: many waiters share transactions, a failing member is
retried alone and fails alone, rows queued with ``later`` land with their batch."""

import asyncio

import pytest
from sqlalchemy import func, select

from gpupool.server.db.engine import Database
from gpupool.server.db.tables import AuditRow
from gpupool.server.group_commit import Batch, GroupCommit

AUDIT = AuditRow.__table__.insert()


def _row(target: str) -> dict[str, object]:
    return {
        "time": 1.0,
        "actor": "t",
        "role": "admin",
        "action": "POST /x",
        "target": target,
        "result": 201,
        "client": "",
        "detail": "",
    }


@pytest.fixture
def db(tmp_path):
    database = Database(f"sqlite:///{tmp_path / 'gc.db'}")
    database.migrate()
    yield database
    database.dispose()


def _targets(db: Database) -> list[str]:
    with db.read() as s:
        return sorted(s.execute(select(AuditRow.target)).scalars())


def test_waiters_share_transactions_and_a_bad_one_fails_alone(db):
    woken = []
    writes = GroupCommit(db, after_commit=lambda: woken.append(1))

    def good(name: str):
        def write(b: Batch) -> str:
            b.session.execute(AUDIT, _row(name))
            b.later(AUDIT, _row(name + "-later"))
            return name

        return write

    def bad(b: Batch) -> str:
        b.session.execute(AUDIT, _row("bad"))  # written, then rolled back with its failure
        raise ValueError("refused")

    async def main() -> list[object]:
        writes.start()
        try:
            jobs = [writes.run(good(f"g{i}")) for i in range(40)]
            jobs.insert(17, writes.run(bad))
            return await asyncio.gather(*jobs, return_exceptions=True)
        finally:
            writes.stop()

    results = asyncio.run(main())
    assert isinstance(results[17], ValueError)
    assert [r for i, r in enumerate(results) if i != 17] == [f"g{i}" for i in range(40)]
    expected = sorted([f"g{i}" for i in range(40)] + [f"g{i}-later" for i in range(40)])
    assert _targets(db) == expected  # nothing of the bad one, everything of the others
    assert writes.items >= 41 and writes.batches < writes.items  # some shared a transaction
    assert woken


def test_without_the_writer_thread_each_call_is_its_own_transaction(db):
    writes = GroupCommit(db)  # an app used without its lifespan: not started

    def write(b: Batch) -> int:
        b.later(AUDIT, _row("alone"))
        return 7

    assert asyncio.run(writes.run(write)) == 7
    with db.read() as s:
        assert s.execute(select(func.count()).select_from(AuditRow)).scalar() == 1


def test_writes_that_change_no_decision_do_not_wake_the_scheduler(db):
    woken = []
    writes = GroupCommit(db, after_commit=lambda: woken.append(1))

    def write(b: Batch) -> None:
        b.session.execute(AUDIT, _row("heartbeat"))

    async def main(wake: bool) -> None:
        writes.start()
        try:
            await asyncio.gather(*(writes.run(write, wake=wake) for _ in range(10)))
        finally:
            writes.stop()

    asyncio.run(main(False))
    assert not woken and len(_targets(db)) == 10  # committed, nobody woken
    asyncio.run(main(True))
    assert woken
    alone = GroupCommit(db, after_commit=lambda: woken.append(2))  # without the writer thread
    asyncio.run(alone.run(write, wake=False))
    assert 2 not in woken
