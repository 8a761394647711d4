"""``python -m gpupool.agent.shim EXIT_FILE -- COMMAND...``: run a workload and record its exit
code in EXIT_FILE, so an agent that restarted meanwhile still learns how the job ended.

The agent starts the shim as the leader of a new process group and stops a workload by
signalling the group: the shim ignores SIGTERM / SIGINT itself so it outlives the command and
writes its status; SIGKILL ends both (no file: the agent knows it killed it).
"""

import os
import signal
import subprocess
import sys


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[1] != "--":
        print("usage: python -m gpupool.agent.shim EXIT_FILE -- COMMAND...", file=sys.stderr)
        return 2
    exit_file, command = argv[0], argv[2:]
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        child = subprocess.Popen(
            command,
            preexec_fn=lambda: (  # the command itself must obey SIGTERM again
                signal.signal(signal.SIGTERM, signal.SIG_DFL),
                signal.signal(signal.SIGINT, signal.SIG_DFL),
            ),
        )
        code = child.wait()
    except OSError as exc:
        print(f"gpupool: cannot start {command[0]!r}: {exc.strerror}", file=sys.stderr)
        code = 127
    tmp = f"{exit_file}.tmp"
    with open(tmp, "w") as f:
        f.write(str(code))
    os.replace(tmp, exit_file)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
