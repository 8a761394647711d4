"""A server started by a program for itself (``gpupool.server.process.start_server``: the
benchmarks, tests) stops once that program is gone, even killed with SIGKILL: a benchmark cut
by its timeout must not leave a server (and its workers) running and skewing the next one."""

import os
import signal
import subprocess
import sys
import textwrap
import time

from tests.support.agents import wait_for

STARTER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from gpupool.server.process import free_port, start_server
    proc = start_server(Path(sys.argv[1]), free_port(), workers=2)
    print(proc.pid, flush=True)
    time.sleep(600)
    """
)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as f:  # a zombie waiting for its reaper is gone
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


def test_a_server_stops_when_the_program_that_started_it_is_killed(tmp_path):
    starter = subprocess.Popen(
        [sys.executable, "-c", STARTER, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        server = int(starter.stdout.readline())
        with open(f"/proc/{server}/task/{server}/children") as f:
            workers = [int(p) for p in f.read().split()]
        assert workers  # its API workers and its scheduler process
        assert _alive(server)
        time.sleep(1.0)
        assert _alive(server)  # not gone on its own
        starter.send_signal(signal.SIGKILL)
        starter.wait()
        gone = time.monotonic()
        wait_for("the server to stop", lambda: not any(map(_alive, [server, *workers])), 30)
        assert time.monotonic() - gone < 30
    finally:
        starter.kill()
        starter.wait()
