"""One process holding several simulated nodes (the embedded agents of ``gpupool up``, each a
thread speaking HTTP to the server): ``python -m gpupool.bench.season.agent_host``. It stops
its agents (and their workloads) on SIGTERM; a SIGKILL leaves the workloads running for the
next start to adopt, as an agent restart does. It exits by itself when its starter is gone."""

import argparse
import os
import signal
import threading
from pathlib import Path

from gpupool.agent.embedded import EmbeddedAgents
from gpupool.agent.workloads import IsolationConfig


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--server", required=True)
    parser.add_argument("--state-dir", required=True, type=Path)
    parser.add_argument("--work-dir", required=True, type=Path)
    parser.add_argument("--nodes", required=True, help="comma list of node names")
    parser.add_argument("--devices", required=True, help="e.g. simulated:4xA100-80G")
    args = parser.parse_args()
    token = os.environ["GPUPOOL_AGENT_TOKEN"]
    starter = os.getppid()
    isolation = IsolationConfig(mode="none", cgroups=False, work_dir=args.work_dir)
    names = {name: args.devices for name in args.nodes.split(",")}
    agents = EmbeddedAgents(args.server, token, args.state_dir, names, isolation, verify=False)
    done = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    signal.signal(signal.SIGINT, lambda *_: done.set())
    agents.start()
    while not done.wait(1.0):
        if os.getppid() != starter:  # the season that started us is gone
            break
    agents.stop()


if __name__ == "__main__":
    main()
