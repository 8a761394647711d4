"""Stopping a real server process: one Ctrl-C stops cleanly, a second one at once — in one
line of output, never a traceback."""

import signal
import time

from tests.support.process import ServerProcess


def _stop_with(server: ServerProcess, signals: int) -> None:
    for _ in range(signals):
        server.proc.send_signal(signal.SIGINT)
        time.sleep(0.05)
    server.proc.wait(timeout=60)


def test_one_ctrl_c_stops_cleanly_and_a_second_one_at_once_without_traceback(tmp_path):
    for signals, expected in ((1, ""), (2, "stopped at once on a second stop signal")):
        data = tmp_path / f"stop-{signals}"
        data.mkdir()
        server = ServerProcess.start(data)
        try:
            _stop_with(server, signals)
        finally:
            server.stop()
        port = server.url.rsplit(":", 1)[1]
        log = (data / f"server-{port}.log").read_text()
        assert server.proc.returncode == 0, log
        assert "Traceback" not in log, log
        assert expected in log
