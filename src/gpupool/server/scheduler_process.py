"""The scheduler in a process of its own beside the API workers (``gpupool server --workers
N``), as kube-scheduler runs beside kube-apiserver.

In a worker, the scheduler thread shares one interpreter lock with that worker's event loop:
under a burst of submissions each slows the other (``gpupool bench api`` measured the
placement latency grow as the API got faster). In its own process the operating system shares
the cores between them. The supervisor starts this process first and waits until it holds the
scheduler lead; the workers still run a scheduler loop that stands by, so if this process
dies a worker takes the lead (``gpupool.server.leader``) and the pool keeps scheduling.

Settings come from the ``GPUPOOL_`` variables the supervisor exported, as for the workers.
"""

import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time

from sqlalchemy import select

from gpupool.server.db.engine import Database
from gpupool.server.db.tables import Meta
from gpupool.server.wake import WAKE_SOCKET, WakeListener, name_for

log = logging.getLogger("gpupool.scheduler")


def main() -> None:
    """Run the scheduler loop until SIGTERM / SIGINT or the supervisor is gone."""
    from gpupool.server.app import exit_with_parent
    from gpupool.server.logs import configure
    from gpupool.server.loop import SchedulerLoop
    from gpupool.server.metrics import Metrics
    from gpupool.server.settings import Settings

    settings = Settings()
    configure(settings.log_level, settings.log_json)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    exit_with_parent()
    db = Database(settings.db_url)
    db.migrate()  # before the workers start: they find the schema done
    loop = SchedulerLoop(db, settings, metrics=Metrics(db))
    name = os.environ.get(WAKE_SOCKET)
    listener = WakeListener(name) if name else None
    loop.start()
    try:
        while not stop.is_set():
            if listener is None:
                stop.wait(1.0)
            elif listener.wait(0.5):  # a worker committed a change
                loop.wake()
    finally:
        loop.stop()
        if listener is not None:
            listener.close()
        db.dispose()


def start(db_url: str, timeout_s: float = 10.0) -> subprocess.Popen | None:
    """Start the scheduler process and wait until it leads, so that no worker's loop wins the
    lead first; after ``timeout_s`` another server holds it (a second server on the same
    database) and this process stands by like the workers. None if it died: the workers'
    loops schedule then. The workers wake it through the socket named in the environment
    (``gpupool.server.wake``)."""
    os.environ[WAKE_SOCKET] = name_for(os.getpid())
    proc = subprocess.Popen([sys.executable, "-m", "gpupool.server.scheduler_process"])
    db = Database(db_url)
    want = f"{socket.gethostname()}:{proc.pid}"  # as gpupool.server.leader names it
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                with db.read() as s:
                    name = s.execute(select(Meta.leader_name).where(Meta.id == 1)).scalar()
            except Exception:  # not migrated yet
                name = None
            if name == want:
                return proc
            time.sleep(0.05)
    except BaseException:  # Ctrl-C while it starts: it stops too
        stop(proc)
        raise
    finally:
        db.dispose()
    if proc.poll() is not None:
        log.warning("the scheduler process exited (%s); the API workers schedule", proc.returncode)
        return None
    log.info("another process leads the scheduler; this server's scheduler process stands by")
    return proc


def stop(proc: subprocess.Popen | None, timeout_s: float = 30.0) -> None:
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


if __name__ == "__main__":
    main()
