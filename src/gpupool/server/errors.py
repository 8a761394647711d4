"""Every failure becomes a JSON answer naming what is wrong: ``{"detail": ..., "field": ...}``.
Bad input is a 4xx; a 500 is a bug and is logged with its traceback."""

import logging
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy.exc import DataError, IntegrityError, OperationalError
from starlette.exceptions import HTTPException as StarletteHTTPException

from gpupool.model import SpecError
from gpupool.plain_errors import plain
from gpupool.server.lifecycle import TransitionError

log = logging.getLogger("gpupool.api")


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        detail: str,
        field: str | None = None,
        headers: dict[str, str] | None = None,
    ):
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.field = field
        self.headers = headers


def not_found(what: str) -> ApiError:
    return ApiError(404, f"{what} not found")


def forbidden(why: str) -> ApiError:
    return ApiError(403, f"forbidden: {why}")


def _body(detail: str, field: str | None = None, **extra: Any) -> dict[str, Any]:
    return {"detail": detail, "field": field, **extra}


def field_path(loc: tuple[Any, ...]) -> str:
    """A pydantic error's location as a dotted field name (``devices.0.index``)."""
    parts = [str(p) for p in loc if p not in ("body", "query", "path", "header")]
    return ".".join(parts) or (str(loc[-1]) if loc else "")


def validation_body(raw: Sequence[Any]) -> dict[str, Any]:
    """A request that failed validation: every error in the field's own terms
    (``gpupool.server.plain_errors``), the first one as the answer's detail."""
    errors = []
    for e in raw:
        field = field_path(tuple(e.get("loc", ())))
        errors.append({"field": field, "message": plain(e, field)})
    first = errors[0] if errors else {"field": None, "message": "invalid request"}
    message = str(first["message"])
    detail = f"{first['field']}: {message}" if first["field"] else message
    return _body(detail, first["field"], errors=errors)


def install(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def _api(_: Request, exc: ApiError) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else {}
        return JSONResponse(
            _body(exc.detail, exc.field), exc.status, headers={**headers, **(exc.headers or {})}
        )

    @app.exception_handler(SpecError)
    async def _spec(_: Request, exc: SpecError) -> JSONResponse:
        return JSONResponse(_body(str(exc), exc.field), 422)

    @app.exception_handler(TransitionError)
    async def _transition(_: Request, exc: TransitionError) -> JSONResponse:
        return JSONResponse(_body(str(exc), "state"), 409)

    @app.exception_handler(IntegrityError)
    async def _integrity(_: Request, exc: IntegrityError) -> JSONResponse:
        text = str(exc.orig).splitlines()[0] if exc.orig else "constraint violated"
        return JSONResponse(_body(f"conflict with existing data: {text}"), 409)

    @app.exception_handler(DataError)
    async def _data(_: Request, exc: DataError) -> JSONResponse:
        text = str(exc.orig).splitlines()[0] if exc.orig else "value out of range"
        return JSONResponse(_body(f"a value does not fit: {text}"), 422)

    @app.exception_handler(OperationalError)
    async def _busy(_: Request, exc: OperationalError) -> JSONResponse:
        log.warning("database busy: %s", exc)
        return JSONResponse(_body("database busy, retry"), 503, headers={"Retry-After": "1"})

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        return JSONResponse(validation_body(exc.errors()), 422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        return JSONResponse(_body(str(exc.detail)), exc.status_code, headers=exc.headers)

    @app.exception_handler(Exception)
    async def _bug(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s %s", request.method, request.url.path)
        return JSONResponse(_body(f"internal error: {type(exc).__name__}"), 500)
