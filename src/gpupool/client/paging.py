"""Reading a paged list of the API whole."""

from typing import Any

from gpupool.client.http import ApiClient


def all_items(api: ApiClient, path: str, **params: Any) -> list[dict[str, Any]]:
    """Every item of a paged list (pages of 1,000)."""
    items: list[dict[str, Any]] = []
    while True:
        page = api.get(path, limit=1000, offset=len(items), **params)
        items += page["items"]
        if not page["items"] or len(items) >= page["total"]:
            return items
