"""The dashboard's pages: HTML shells in the user's language whose scripts read the API with
the session cookie. A page needs a session (else the login page) and, for billing and
admin, a role that may read what they show (else a page that says so)."""

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, FileSystemLoader, select_autoescape

from gpupool import __version__
from gpupool.server.auth import Principal, Role
from gpupool.server.deps import MAX_ID, principal_of
from gpupool.server.session import SESSION_COOKIE, csrf_token
from gpupool.server.web.i18n import language, messages

router = APIRouter(include_in_schema=False)
HERE = Path(__file__).parent
ENV = Environment(
    loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(["html"])
)
HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
EVERYONE = (Role.ADMIN, Role.TENANT_ADMIN, Role.MEMBER, Role.VIEWER, Role.FINANCE)


@dataclass(frozen=True)
class PageDef:
    name: str
    path: str
    roles: tuple[Role, ...] = EVERYONE
    in_nav: bool = True


PAGES = (
    PageDef("overview", "/"),
    PageDef("nodes", "/nodes"),
    PageDef("jobs", "/jobs"),
    PageDef("job", "/jobs/{job_id}", in_nav=False),
    PageDef("services", "/services"),
    PageDef("teams", "/teams"),
    PageDef("billing", "/billing", (Role.ADMIN, Role.FINANCE, Role.TENANT_ADMIN)),
    PageDef("admin", "/admin", (Role.ADMIN, Role.TENANT_ADMIN)),
)


async def session_principal(request: Request) -> tuple[Principal | None, str]:
    """The principal of the session cookie (cached like bearer tokens), and the cookie."""
    token = request.cookies.get(SESSION_COOKIE, "")
    if not token:
        return None, ""
    who = await principal_of(request.app.state.ctx, token, time.time())
    return who, token


def _script_json(value: object) -> str:
    """JSON safe inside a <script> element: no '<' at all, so no '</script>' or '<!--'."""
    return json.dumps(value, ensure_ascii=False).replace("<", "\\u003c")


def render(template: str, request: Request, status: int = 200, **values: Any) -> HTMLResponse:
    lang = language(request)
    table = messages(lang)
    html = ENV.get_template(template).render(
        lang=lang, t=lambda key: table.get(key, key), version=__version__, **values
    )
    return HTMLResponse(html, status_code=status, headers=HEADERS)


@router.get("/login")
def login_page(request: Request) -> HTMLResponse:
    lang = language(request)
    boot = {"lang": lang, "messages": messages(lang)}
    return render("login.html", request, boot=_script_json(boot))


def _page(spec: PageDef):
    async def show(request: Request) -> Response:
        who, token = await session_principal(request)
        if who is None or who.role not in EVERYONE:
            return RedirectResponse(f"/login?next={request.url.path}", status_code=303)
        lang = language(request)
        job_id = request.path_params.get("job_id")
        if job_id is not None and not (job_id.isascii() and job_id.isdigit() and int(job_id)):
            job_id = "0"  # the page says no such job
        allowed = who.role in spec.roles
        boot = {
            "lang": lang,
            "page": spec.name if allowed else "forbidden",
            "csrf": csrf_token(token),
            "user": who.user,
            "role": str(who.role),
            "tenant": who.tenant,
            "job": min(int(job_id), MAX_ID) if job_id is not None else None,  # 0: none
            "messages": messages(lang),
        }
        return render(
            "page.html" if allowed else "forbidden.html",
            request,
            status=200 if allowed else 403,
            page=spec.name,
            nav=[p for p in PAGES if p.in_nav and who.role in p.roles],
            who=who,
            boot=_script_json(boot),
        )

    show.__name__ = f"page_{spec.name}"
    return show


for _spec in PAGES:
    router.add_api_route(_spec.path, _page(_spec), methods=["GET"], response_class=HTMLResponse)
