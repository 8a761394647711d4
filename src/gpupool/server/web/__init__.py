"""The web dashboard, served by the gpupool server itself: pages at ``/`` (HTML shells
rendered with Jinja2 in the user's language), their scripts and styles under ``/static``
(packaged, nothing fetched from elsewhere), and the login that turns a token into a session.
The pages read the same ``/api/v1`` routes as the CLI, so they show exactly what the
caller's role and tenant may see."""

from pathlib import Path

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from gpupool.server.web import login, pages

STATIC = Path(__file__).parent / "static"


def install(app: FastAPI) -> None:
    app.include_router(login.router)
    app.include_router(pages.router)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
