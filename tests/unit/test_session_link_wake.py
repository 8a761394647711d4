"""A session's link posts to its pump through a wake pipe; the pump closes the pipe when it
ends while the link thread may still post. A write after the close landed on whatever the
kernel gave that number next — another session's pipe, a socket, a database file (hostile
review, round 5: strace showed ``write(101, "x") = -1 EBADF`` as the pump closed 101, and
other threads reused 101 five times in 25 s)."""

import os
from pathlib import Path

from gpupool.agent.session_link import SessionLink
from gpupool.agent.terminals import Where


def test_a_post_after_the_pump_ended_writes_to_no_one_elses_descriptor(tmp_path: Path):
    nowhere = Where({}, "/", None, None, [], None, False, 0)
    link = SessionLink(1, lambda: "ws://127.0.0.1:9/x", "token", lambda: nowhere, tmp_path)
    old = (link._wake_r, link._wake_w)

    def fail() -> None:
        raise RuntimeError("the pump ends")

    link._poll_once = fail  # type: ignore[method-assign]
    link._pump()  # ends at once, as on a bug or the session's end: closes its pipe
    assert link.done
    read_end, write_end = os.pipe()  # the numbers the kernel hands out next
    try:
        assert {read_end, write_end} == set(old)  # the test means something only then
        os.set_blocking(read_end, False)
        link._post("down")  # the link thread, a moment late
        try:
            got = os.read(read_end, 16)
        except BlockingIOError:
            got = b""
        assert got == b""
    finally:
        os.close(read_end)
        os.close(write_end)
