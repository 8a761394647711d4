"""Errors raised for bad user input anywhere in the shared vocabulary."""

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the vocabulary itself does not load pydantic
    from pydantic import ValidationError


class SpecError(ValueError):
    """A resource spec, quantity or name that cannot be understood.

    The message always names the offending token and what was expected, so the CLI and
    the API can show it as is (CLI exit code 2, HTTP 4xx) without a traceback.
    """

    def __init__(self, message: str, *, token: str | None = None, field: str | None = None):
        super().__init__(message)
        self.token = token
        self.field = field


def from_validation(exc: "ValidationError", where: str, whole: str = "") -> SpecError:
    """A file's first validation problem as a SpecError naming its field (dotted, or
    ``whole`` when it is about the whole document): ``where: field: what is wrong``."""
    first = exc.errors()[0]
    loc = ".".join(str(x) for x in first["loc"]) or whole
    return SpecError(f"{where}: {loc}: {first['msg']}", field=loc)
