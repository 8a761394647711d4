"""Turn user errors into one clear line on stderr and exit code 2, never a traceback."""

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from typing import ParamSpec, TypeVar

import typer
from rich.console import Console
from rich.markup import escape

from gpupool.cli.output import users_zone, visible
from gpupool.model import SpecError

P = ParamSpec("P")
R = TypeVar("R")
err_console = Console(stderr=True, highlight=False)


def print_error(exc: Exception) -> None:
    """``error: ...`` in red on stderr; the message (often the server's, quoting what a user
    typed) shown as text, control characters made visible."""
    text = visible(users_zone(str(exc)))  # the server writes UTC: said in the user's zone
    err_console.print(f"[bold red]error:[/] {escape(text)}", soft_wrap=True)


@contextmanager
def user_errors() -> Iterator[None]:
    try:
        yield
    except SpecError as exc:
        print_error(exc)
        raise typer.Exit(code=2) from None


def friendly(fn: Callable[P, R]) -> Callable[P, R]:
    """Decorator form of ``user_errors`` for Typer commands."""

    @wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        with user_errors():
            return fn(*args, **kwargs)

    return wrapper
