"""Reading a workload's output files for upload: whole, in chunks that end on a character
boundary, with every byte kept (NUL and bytes that are not UTF-8 become visible escapes such
as ``\\x00`` — a database text column cannot hold NUL, and PostgreSQL refused the whole chunk),
and a limit per job after which the output is dropped and the log says so.
Pure functions over bytes, plus one reader of a file at an offset.
"""

from dataclasses import dataclass
from pathlib import Path

CHUNK = 64 * 1024
TRUNCATED = (
    "\n[gpupool: this job's log reached its limit of {limit} bytes; "
    "its further output was not kept]\n"
)


def utf8_cut(data: bytes) -> int:
    """How many leading bytes of ``data`` end on a UTF-8 character boundary (a character cut
    in two by a chunk boundary is sent whole with the next chunk)."""
    end = len(data)
    for back in range(1, min(4, end) + 1):
        byte = data[end - back]
        if byte < 0x80 or byte >= 0xF8:
            return end  # ASCII (nothing cut), or a byte no character starts with
        if byte >= 0xC0:  # the lead byte of the last character
            need = 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return end if back >= need else end - back
    return end  # continuation bytes without a lead: invalid anyway, escaped below


def log_text(data: bytes) -> str:
    """Text a database stores, keeping every byte: NUL and invalid bytes escaped."""
    return data.decode("utf-8", "backslashreplace").replace("\x00", "\\x00")


@dataclass
class Piece:
    text: str
    consumed: int  # bytes of the file this piece covers


def read_pieces(path: Path, offset: int, budget: int, at_end: bool) -> list[Piece]:
    """The pieces of ``path`` from ``offset``, at most ``budget`` bytes. ``at_end``: the
    workload has ended, so a trailing partial character is sent as it is."""
    pieces: list[Piece] = []
    with path.open("rb") as f:
        f.seek(offset)
        while budget > 0:
            data = f.read(min(CHUNK, budget))
            if not data:
                break
            keep = len(data) if (at_end and len(data) < CHUNK) else utf8_cut(data)
            if keep == 0:  # a lone partial character: wait for the rest (or the end)
                keep = len(data) if at_end else 0
            if keep == 0:
                break
            pieces.append(Piece(log_text(data[:keep]), keep))
            budget -= keep
            f.seek(offset + sum(p.consumed for p in pieces))
    return pieces
