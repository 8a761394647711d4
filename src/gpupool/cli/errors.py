"""Turn user errors into one clear line on stderr and exit code 2, never a traceback; said
in the command's own terms — the option a bad value came from, not the request field it was
sent as, nor the validator's words (issue 59)."""

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import wraps
from typing import Any, ParamSpec, TypeVar

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from typer.core import TyperGroup

from gpupool.cli.output import users_zone, visible
from gpupool.client import ClientError
from gpupool.model import SpecError
from gpupool.plain_errors import plain

try:  # typer carries its own click from 0.16 on
    from typer._click.globals import get_current_context
except ImportError:  # pragma: no cover - an older typer, on click
    from click import get_current_context  # type: ignore[no-redef,unused-ignore]

P = ParamSpec("P")
R = TypeVar("R")
err_console = Console(stderr=True, highlight=False)


# request fields sent under another name than the option's (every other field is sent as
# the option of its own name, or without its unit: ``stable_s`` from ``--stable``): the
# options each may have come from, the one that wins first
SENT_AS: dict[str, tuple[str, ...]] = {
    "max_runtime_s": ("max_runtime", "time_limit"),
    "request": ("request", "gpu", "gpu_mem", "gpu_share", "mig", "cpu", "mem"),
    "gang_size": ("gang",),
    "idempotency_key": ("key",),
    "checkpoint.signal": ("checkpoint_signal",),
    "checkpoint.grace_s": ("checkpoint_grace",),
    "effective_from": ("start",),
    "discount_pct": ("discount",),
    "task_prices": ("task_price",),
    "expires_at": ("expires",),
    "mig_cards_min": ("mig_min",),
    "mig_cards_max": ("mig_max", "mig_max_all"),
    "min_replicas": ("min",),
    "max_replicas": ("max",),
    "job_id": ("array",),
}
JOINED = {"request"}  # made of every one of these given: each is named
UNITS = ("_s", "_mib", "_pct", "_fen")


def _given(value: Any) -> bool:
    return value is not None and value is not False and value != () and value != []


def option_for(field: str, given_only: bool = True) -> str | None:
    """The option (``--time``) of the running command that the server's request ``field``
    came from; None when it came from none of them."""
    try:
        ctx = get_current_context(silent=True)
    except RuntimeError:  # pragma: no cover
        return None
    if ctx is None:
        return None
    # options only: an argument is sent as the field of its own name (``command``, ``name``)
    params = {p.name: p for p in ctx.command.params if p.name and p.param_type_name == "option"}
    last = field.rsplit(".", 1)[-1]
    bare = next((last.removesuffix(u) for u in UNITS if last.endswith(u)), last)
    candidates = [*SENT_AS.get(field, ()), field.replace(".", "_"), last, bare]
    known = dict.fromkeys(c for c in candidates if c in params)
    given = [c for c in known if _given(ctx.params.get(c))]  # a value the user gave
    if not given and (given_only or not known):
        return None  # it came from elsewhere: an argument, a script's directive
    given = given or list(known)
    chosen = given if field in JOINED else given[:1]
    return "/".join(str(params[c].opts[0]) for c in chosen)


def said(exc: Exception) -> str:
    """What went wrong, in the command's terms: a server's ``422 max_runtime_s: …`` as
    ``422 --time: …`` (each of ``a/b:``), UTC moments in the user's zone."""
    text = str(exc)
    if isinstance(exc, ClientError) and exc.field:
        status, _, rest = text.partition(" ")
        head, sep, tail = rest.partition(": ")
        fields = head.split("/")
        if sep and exc.field in fields:
            # a rule of several fields (``mig_cards_min/mig_cards_max``) names each option
            loose = len(fields) > 1
            options = [exc.options.get(f) or option_for(f, not loose) for f in fields]
            if all(options):
                text = f"{status} {'/'.join(o for o in options if o)}: {tail}"
    return users_zone(text)


def print_error(exc: Exception) -> None:
    """``error: ...`` in red on stderr; the message (often the server's, quoting what a user
    typed) shown as text, control characters made visible."""
    text = visible(said(exc))
    err_console.print(f"[bold red]error:[/] {escape(text)}", soft_wrap=True)


class PlainGroup(TyperGroup):
    """The app's root: a value the command line cannot read is said in words (typer checks
    options with pydantic, and said ``Invalid value for '--limit': Input should be a valid
    integer, unable to parse string as an integer``)."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except typer.BadParameter as exc:
            cause = exc.__cause__
            if isinstance(cause, ValidationError):
                name = exc.param.name if exc.param is not None and exc.param.name else ""
                exc.message = "; ".join(plain(dict(e), name) for e in cause.errors())
            raise


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
