"""The frames of an interactive session's relay (docs/interactive.md, "The relay"): a person's
terminal travels client ⇄ server ⇄ agent, the agent having dialled out.

Between the server and an agent one WebSocket per session (its *tunnel*) carries many
*streams*: a terminal attached, a command run.
Data is a binary frame, ``stream id (4 bytes, big-endian) | channel (1 byte) | bytes``;
everything else a JSON text frame with ``"t"`` (its type) and ``"s"`` (its stream). Between
a client and the server (and between the server's own processes) one connection is one
stream: binary ``channel | bytes``, text the same JSON without ``"s"``.

Flow control is by credit, per stream and direction: a sender has ``WINDOW`` bytes to send
and gets them back as the receiver acknowledges (``{"t": "ack", "n": bytes}``) what it has
written on — to the person's socket (the server's edge) or into the terminal (the agent). So a
client that reads nothing or a terminal that prints without end holds at most a window in
each hop, never more."""

import re
import struct
from typing import Any

HEADER = struct.Struct(">IB")  # stream id, channel
OUT, ERR = 0, 1  # channels: a terminal's output (or a command's stdout), a command's stderr
WINDOW = 256 * 1024  # bytes in flight per stream and direction
CHUNK = 32 * 1024  # at most this much data in one frame
MAX_STREAMS = 64  # streams open at once on one session's tunnel
MAX_TERMINALS = 8  # terminals (live or ended, kept for a reattach) in one session
RING = 64 * 1024  # what a terminal keeps of its output for the next attach
MAX_COMMAND = 256  # arguments of a command run in a session
MAX_ARG = 4096  # characters of one argument
MAX_CONTROL = 64 * 1024  # characters of one control frame
MAX_MESSAGE = MAX_CONTROL + CHUNK + 16  # one message on the node's link, either way
SIGNALS = ("INT", "TERM", "HUP", "QUIT", "KILL")
TERM_NAME = re.compile(r"[A-Za-z0-9._+-]{1,64}")  # $TERM: xterm-256color, screen.linux
MAX_COLS = MAX_ROWS = 10_000


class FrameError(ValueError):
    """A frame that does not read as the relay's."""


def data_frame(stream: int, channel: int, payload: bytes) -> bytes:
    return HEADER.pack(stream, channel) + payload


def read_data(frame: bytes) -> tuple[int, int, bytes]:
    if len(frame) < HEADER.size:
        raise FrameError("a data frame shorter than its header")
    stream, channel = HEADER.unpack_from(frame)
    return stream, channel, frame[HEADER.size :]


def size(value: Any, what: str, most: int) -> int:
    """A positive integer of at most ``most`` (a window's columns, an ack's bytes)."""
    if type(value) is not int or not 0 < value <= most:
        raise FrameError(f"{what}: a whole number from 1 to {most}")
    return value


def command_of(value: Any) -> list[str] | None:
    """A command to run (None: the user's shell), bounded."""
    if value is None:
        return None
    if (
        not isinstance(value, list)
        or not 0 < len(value) <= MAX_COMMAND
        or not all(isinstance(a, str) and len(a) <= MAX_ARG and "\0" not in a for a in value)
    ):
        raise FrameError(
            f"command: a list of 1 to {MAX_COMMAND} arguments of at most {MAX_ARG} "
            "characters, without NUL"
        )
    return list(value)


def term_of(value: Any) -> str:
    if value is None:
        return "xterm-256color"
    if not isinstance(value, str) or not TERM_NAME.fullmatch(value):
        raise FrameError("term: a terminal type such as xterm-256color")
    return value


def attach_of(value: Any) -> int | str | None:
    """Which terminal to attach to: its number, "last" (the newest), or None (a new one)."""
    if value is None or value == "last":
        return None if value is None else "last"
    if type(value) is int and 0 < value < 2**31:
        return value
    raise FrameError('attach: a terminal number or "last"')


def open_request(frame: dict[str, Any]) -> dict[str, Any]:
    """An ``open`` as the agent acts on it, checked: a terminal (``pty``: a pseudo-terminal,
    else pipes), or a connection to the session's web app (``port``: a notebook's; which
    port is the agent's to know, never the request's)."""
    kind = frame.get("kind", "terminal")
    if kind == "port":
        return {"kind": "port"}
    if kind != "terminal":
        raise FrameError('kind: "terminal" or "port"')
    return {
        "kind": "terminal",
        "command": command_of(frame.get("command")),
        "pty": frame.get("pty", True) is not False,
        "cols": size(frame.get("cols", 80), "cols", MAX_COLS),
        "rows": size(frame.get("rows", 24), "rows", MAX_ROWS),
        "term": term_of(frame.get("term")),
        "attach": attach_of(frame.get("attach")),
    }


def signal_of(value: Any) -> str:
    if value not in SIGNALS:
        raise FrameError(f"sig: one of {', '.join(SIGNALS)}")
    return str(value)
