"""Who a workload runs as. With ``tenant-users`` isolation (the default for an agent running
as root) every tenant's workloads run as an unprivileged Unix user of that tenant — mapped by
the operator (``--tenant-user algo=svc-algo``, e.g. to LDAP users) or created on first use
(``gp-<tenant>``: a system account without login shell or home) — so one tenant's job cannot
read another's files, environment or processes, nor the agent's. ``none`` runs workloads as
the agent's own user (a non-root agent, or a single-team node)."""

import hashlib
import os
import pwd
import re
import shutil
import subprocess
import threading
import time
from dataclasses import dataclass
from enum import StrEnum

from gpupool.model import SpecError

MAX_USER_NAME = 32  # Linux user names (useradd's limit)
USERADD_IN_USE = 9  # useradd: the name is taken (another agent created it first)
USERADD_LOCKED = 10  # useradd: /etc/passwd is locked by another writer


class Isolation(StrEnum):
    AUTO = "auto"  # tenant-users when root, else none
    TENANT_USERS = "tenant-users"
    NONE = "none"


class IsolationError(Exception):
    """A tenant's identity cannot be had; the allocation fails with this reason."""


@dataclass(frozen=True, slots=True)
class Identity:
    user: str
    uid: int
    gid: int


def resolve(mode: str, euid: int) -> Isolation:
    """The isolation an agent runs with; refuses ``tenant-users`` without root, clearly."""
    try:
        wanted = Isolation(mode)
    except ValueError:
        names = ", ".join(i.value for i in Isolation)
        raise SpecError(f"isolation: {mode!r} is not one of {names}", field="isolation") from None
    if wanted is Isolation.AUTO:
        return Isolation.TENANT_USERS if euid == 0 else Isolation.NONE
    if wanted is Isolation.TENANT_USERS and euid != 0:
        raise SpecError(
            f"isolation tenant-users: the agent must run as root to start workloads as other "
            f"users (it runs as uid {euid}); run it as root, or pass --isolation none to run "
            "every workload as the agent's own user",
            field="isolation",
        )
    return wanted


def unix_name(prefix: str, tenant: str) -> str:
    """``gp-algorithm`` for tenant ``algorithm``. Tenant names allow capitals, dots, letters
    of any script and up to 100 characters, user names do not: such names get a hash suffix
    so two tenants never share a user (``Team.A`` → ``gp-team-a-3f2a1c``; ``研发部`` →
    ``gp-5d1e0c``, ``vision研发`` → ``gp-vision-9b04aa``: the ASCII they have, then the
    hash)."""
    digest = hashlib.sha256(tenant.encode()).hexdigest()[:6]
    if not tenant.isascii():
        kept = re.sub(r"[^a-z0-9_]+", "-", tenant.lower()).strip("-")
        base = (prefix + kept)[: MAX_USER_NAME - 7].rstrip("-") or "t"  # starts with a letter
        return f"{base}-{digest}"
    plain = re.sub(r"[^a-z0-9_-]", "-", tenant.lower())
    name = prefix + plain
    if plain != tenant or len(name) > MAX_USER_NAME:
        name = f"{name[: MAX_USER_NAME - 7]}-{digest}"
    return name


def parse_mapping(items: list[str]) -> dict[str, str]:
    """``TENANT=USER`` pairs (``--tenant-user``)."""
    out = {}
    for item in items:
        tenant, sep, user = item.partition("=")
        if not sep or not tenant or not user:
            raise SpecError(f"tenant-user: {item!r} is not TENANT=USER", field="tenant-user")
        out[tenant] = user
    return out


class TenantUsers:
    """Tenant → Unix identity, creating system users for unmapped tenants when allowed."""

    _create_lock = threading.Lock()  # one useradd at a time in this process

    def __init__(self, mapping: dict[str, str], prefix: str = "gp-", create: bool = True):
        self.mapping = dict(mapping)
        self.prefix = prefix
        self.create = create

    def identity(self, tenant: str) -> Identity:
        name = self.mapping.get(tenant) or unix_name(self.prefix, tenant)
        entry = self._lookup(name)
        if entry is None:
            if tenant in self.mapping or not self.create:
                raise IsolationError(
                    f"no Unix user {name!r} for tenant {tenant} on this node (create it, or map "
                    f"the tenant with --tenant-user {tenant}=USER)"
                )
            entry = self._create(name, tenant)
        if entry.pw_uid == 0 or entry.pw_uid == os.geteuid():
            raise IsolationError(
                f"tenant {tenant} maps to {name} (uid {entry.pw_uid}), a privileged user: refused"
            )
        return Identity(name, entry.pw_uid, entry.pw_gid)

    @staticmethod
    def _lookup(name: str) -> pwd.struct_passwd | None:
        try:
            return pwd.getpwnam(name)
        except KeyError:
            return None

    def _create(self, name: str, tenant: str) -> pwd.struct_passwd:
        useradd = shutil.which("useradd") or next(
            (p for p in ("/usr/sbin/useradd", "/sbin/useradd") if os.path.exists(p)), None
        )
        if useradd is None:
            raise IsolationError(
                f"cannot create user {name} for tenant {tenant}: useradd not found (map the "
                f"tenant to an existing user with --tenant-user {tenant}=USER)"
            )
        argv = [
            useradd, "--system", "--user-group", "--no-create-home",
            "--home-dir", "/nonexistent", "--shell", "/usr/sbin/nologin",
            "--comment", f"gpupool tenant {tenant}"[:200], name,
        ]  # fmt: skip
        with self._create_lock:
            for _ in range(20):
                done = subprocess.run(argv, capture_output=True, text=True, check=False)
                if done.returncode != USERADD_LOCKED:
                    break
                time.sleep(0.1)  # another process holds /etc/passwd: try again shortly
        entry = self._lookup(name)
        if entry is None or done.returncode not in (0, USERADD_IN_USE):
            text = (done.stderr or done.stdout).strip().splitlines()
            raise IsolationError(
                f"cannot create user {name} for tenant {tenant}: "
                f"{text[-1] if text else f'useradd exit code {done.returncode}'}"
            )
        return entry
