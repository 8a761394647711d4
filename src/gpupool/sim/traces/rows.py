"""Row errors shared by the trace loaders: reported with line numbers, never a traceback."""

from collections.abc import Sequence
from dataclasses import dataclass

from gpupool.model import SpecError


@dataclass(frozen=True, slots=True)
class RowError:
    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


def bad_rows_error(name: str, errors: Sequence[RowError]) -> SpecError:
    """One error naming the file, how many rows are bad and the first few of them."""
    shown = "; ".join(str(e) for e in errors[:5])
    more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
    return SpecError(f"{name}: {len(errors)} bad row(s): {shown}{more}")
