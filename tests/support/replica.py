"""The stand-in inference replica for the service tests: examples/replica.py (a real HTTP
server process, stdlib only, so it runs under any Python) passed as ``python -c`` source."""

from pathlib import Path

REPLICA = (Path(__file__).resolve().parents[2] / "examples" / "replica.py").read_text()
