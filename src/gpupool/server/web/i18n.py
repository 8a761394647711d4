"""The dashboard's two languages: one flat message table per language (``messages/*.json``),
the same keys in both (a test checks), chosen by the ``gpupool_lang`` cookie, else the
browser's Accept-Language."""

import json
from functools import cache
from pathlib import Path

from fastapi import Request

from gpupool.server.session import LANG_COOKIE

LANGS = ("en", "zh")
HERE = Path(__file__).parent


@cache
def messages(lang: str) -> dict[str, str]:
    return json.loads((HERE / "messages" / f"{lang}.json").read_text(encoding="utf-8"))


def language(request: Request) -> str:
    chosen = request.query_params.get("lang") or request.cookies.get(LANG_COOKIE, "")
    if chosen in LANGS:
        return chosen
    for part in request.headers.get("accept-language", "").split(","):
        tag = part.split(";")[0].strip().lower()
        if tag.startswith("zh"):
            return "zh"
        if tag.startswith("en"):
            return "en"
    return "en"
