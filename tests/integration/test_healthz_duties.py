"""/healthz says which duty of a leader is not running (issue 60): a duty failing now (it is
retried with backoff) after "ok; ", and a stopped thread of duties as 503 — before, a leader
whose alert or services thread had died answered a plain "ok"."""

import threading

import httpx

from gpupool.server.settings import Settings
from tests.support.agents import wait_for
from tests.support.live import live_server


def _health(url: str) -> tuple[int, str]:
    r = httpx.get(f"{url}/healthz", timeout=5)
    return r.status_code, r.text


def test_healthz_names_a_failing_duty_and_a_stopped_thread(tmp_path):
    settings = Settings(data_dir=tmp_path, log_json=False, cycle_interval_s=0.2,
                        sample_interval_s=0.5)  # fmt: skip
    with live_server(settings, run_scheduler=True) as srv:
        loop = srv.ctx.loop
        wait_for("the lead", lambda: loop.leadership.held)
        assert _health(srv.url) == (200, "ok")

        def broken(now: float | None = None) -> None:
            raise OSError("disk full")

        names = [d.name for d in loop.duties.duties]
        index = names.index("pool-samples")
        duty = loop.duties.duties[index]
        loop.duties.duties[index] = type(duty)(duty.name, broken, duty.every_s)
        code, text = wait_for("the failure said", lambda: (h := _health(srv.url))[1] != "ok" and h)
        assert code == 200 and text.startswith("ok; pool-samples failing (")
        assert "OSError: disk full" in text
        dead = threading.Thread(target=lambda: None)
        dead.start()
        dead.join()
        loop._services = dead  # as if the services thread had died
        code, text = _health(srv.url)
        assert code == 503 and text.startswith("degraded: its services thread stopped"), text
