"""``KEY=VALUE`` options (node labels, environment variables), read into a dict."""

from gpupool.model import SpecError


def key_values(items: list[str], field: str, shape: str = "KEY=VALUE") -> dict[str, str]:
    """Each ``item`` split at its first ``=``; one without a key or an ``=`` is an error
    naming ``field``."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SpecError(f"{field} {item!r} is not {shape}", field=field)
        out[key] = value
    return out
