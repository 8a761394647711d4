"""Saved servers and tokens, as kubectl's contexts: ``client.json`` in the config dir (mode
0600) holds named profiles and the current one. ``gpupool login --profile prod`` adds one and
makes it current; ``gpupool --profile lab ...`` or ``GPUPOOL_PROFILE=lab`` picks one for a
command.

Which server and token a command uses: a profile chosen for the command (``--profile`` or
``GPUPOOL_PROFILE``) wins; otherwise ``GPUPOOL_SERVER`` / ``GPUPOOL_TOKEN`` win over the
current profile; otherwise the local default server without a token. A profile may keep the CA
of its HTTPS server (``ca_for``); ``GPUPOOL_CA`` wins over it. A file from before
profiles (``{"server", "token"}``) reads as the profile ``default``."""

import json
import os
from pathlib import Path
from typing import Any

DEFAULT_SERVER = "http://127.0.0.1:8080"
DEFAULT_PROFILE = "default"


class ProfileError(Exception):
    """A profile file that cannot be read or a profile that does not exist."""


def config_dir() -> Path:
    return Path(os.environ.get("GPUPOOL_CONFIG_DIR") or Path.home() / ".config" / "gpupool")


def _path() -> Path:
    return config_dir() / "client.json"


def load() -> dict[str, Any]:
    """``{"current": name | None, "profiles": {name: {"server", "token"}}}``."""
    path = _path()
    if not path.is_file():
        return {"current": None, "profiles": {}}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        raise ProfileError(f"{path} is not readable JSON; run gpupool login again") from None
    if not isinstance(data, dict):
        raise ProfileError(f"{path} is not a profile file; run gpupool login again")
    if "profiles" not in data:  # the file before profiles: one server and token
        saved = {k: data[k] for k in ("server", "token") if k in data}
        return {"current": DEFAULT_PROFILE, "profiles": {DEFAULT_PROFILE: saved}}
    return {"current": data.get("current"), "profiles": dict(data.get("profiles") or {})}


def store(data: dict[str, Any]) -> Path:
    path = _path()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(data, f, indent=2)
    os.chmod(path, 0o600)  # an older file may have been created with other bits
    return path


def save(name: str, server: str, token: str, ca: str | None = None) -> Path:
    """Add or replace profile ``name`` and make it the current one. ``ca``: the PEM of the
    certificate authority its HTTPS server is trusted from (a site's own CA), kept in the
    profile itself, so later commands trust it without ``GPUPOOL_CA`` and the file may go."""
    data = load()
    data["profiles"][name] = {"server": server, "token": token} | ({"ca": ca} if ca else {})
    data["current"] = name
    return store(data)


def current() -> str | None:
    """The current profile's name (None: none yet)."""
    return load()["current"]


def ca_for(server: str) -> str | None:
    """The CA (PEM) saved with the profile a command uses, when that profile's server is
    ``server``: a CA vouches for the server it was given for, never for another one a
    command names (``GPUPOOL_SERVER``)."""
    data = load()
    name = os.environ.get("GPUPOOL_PROFILE") or data["current"] or ""
    profile = data["profiles"].get(name) or {}
    if str(profile.get("server") or "").rstrip("/") != server.rstrip("/"):
        return None
    ca = profile.get("ca")
    return ca if isinstance(ca, str) and ca else None


def use(name: str) -> Path:
    data = load()
    if name not in data["profiles"]:
        raise ProfileError(f"profile: no profile {name!r} (known: {_known(data)})")
    data["current"] = name
    return store(data)


def delete(name: str) -> Path:
    data = load()
    if data["profiles"].pop(name, None) is None:
        raise ProfileError(f"profile: no profile {name!r} (known: {_known(data)})")
    if data["current"] == name:
        data["current"] = None
    return store(data)


def _known(data: dict[str, Any]) -> str:
    return ", ".join(sorted(data["profiles"])) or "none; gpupool login --profile NAME"


def credentials() -> tuple[str, str | None]:
    """The server URL and token a command uses (see the module's rules)."""
    data = load()
    chosen = os.environ.get("GPUPOOL_PROFILE")
    if chosen:
        profile = data["profiles"].get(chosen)
        if profile is None:
            raise ProfileError(f"profile: no profile {chosen!r} (known: {_known(data)})")
        return str(profile.get("server") or DEFAULT_SERVER).rstrip("/"), profile.get("token")
    current = data["profiles"].get(data["current"] or "", {})
    server = os.environ.get("GPUPOOL_SERVER") or current.get("server") or DEFAULT_SERVER
    token = os.environ.get("GPUPOOL_TOKEN") or current.get("token")
    return str(server).rstrip("/"), token
