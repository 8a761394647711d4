"""Errors raised for bad user input anywhere in the shared vocabulary."""


class SpecError(ValueError):
    """A resource spec, quantity or name that cannot be understood.

    The message always names the offending token and what was expected, so the CLI and
    the API can show it as is (CLI exit code 2, HTTP 4xx) without a traceback.
    """

    def __init__(self, message: str, *, token: str | None = None, field: str | None = None):
        super().__init__(message)
        self.token = token
        self.field = field
