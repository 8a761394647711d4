"""The agent's side of an idle warning (``agent.sessions``): a warned allocation in the orders
is told to its session's terminals once, a withdrawn one says so, a new release time is told
again, and the end of a warned session says it had been warned."""

from pathlib import Path

from gpupool.agent.sessions import SessionKeeper, idle_warning
from gpupool.model.protocol import OrderOut


class FakeLink:
    """What the keeper asks of a session's link (its threads are not the test's)."""

    def __init__(self) -> None:
        self.told: list[str] = []
        self.ended: list[str] = []
        self.done = self.ending = False

    def tell(self, text: str) -> None:
        self.told.append(text)

    def end(self, why: str) -> None:
        self.ended.append(why)


def order(release_at: float | None) -> OrderOut:
    return OrderOut(
        id=5, job_id=50, tenant="alpha", generation=1, state="active", borrowed=False,
        action="bind", after=[], nodes=[], created_at=0.0, released_at=None,
        release_reason="", job_name="", job_state="running", on_lost="requeue", command=[],
        env={}, image=None, max_runtime_s=None, interactive="shell", idle_release_at=release_at,
    )  # fmt: skip


def test_a_warning_is_told_once_withdrawn_in_words_and_a_new_one_told_again():
    keeper = SessionKeeper("n1", lambda: "http://x", "t", lambda a: Path("/nonexistent"))
    link = FakeLink()
    keeper.links[5] = link  # type: ignore[assignment]
    keeper._warn({5: order(None)})
    assert link.told == []
    keeper._warn({5: order(1000.0)})
    keeper._warn({5: order(1000.0)})  # the same warning in the next orders: not again
    assert len(link.told) == 1 and "will be released" in link.told[0]
    keeper._warn({5: order(None)})
    assert link.told[-1] == "idle warning withdrawn: this session was used again"
    keeper._warn({5: order(2000.0)})
    assert len(link.told) == 3 and "will be released" in link.told[-1]
    keeper.end(5, "allocation released by the server")
    assert link.ended == [
        "this session's job is being stopped (allocation released by the server; it had "
        "been warned as idle)"
    ]
    assert keeper.warned == {}


def test_the_warning_says_when_in_minutes_or_seconds_and_what_is_kept():
    text = idle_warning(1_000_600.0, 1_000_000.0)
    assert "in 10 min (at " in text and "UTC)" in text
    assert "in 30 s" in idle_warning(1_000_030.0, 1_000_000.0)
    assert "files are kept where the job was started from" in text
