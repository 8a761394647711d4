"""Which agent versions a server works with (version skew), decided purely.

The rule, after Kubernetes' (a kubelet may be some minor versions older than its API server):
an agent may be up to ``OLDER_MINORS`` minor versions older than its server, or one minor
version newer (an upgrade may start with the agents: they leave out what an older server does
not read); a different major version, or more skew than that, is refused at registration.
Versions that do not parse (an agent too old to say, a tree run uninstalled) are accepted and
said to be unknown.
"""

from dataclasses import dataclass
from enum import Enum

from packaging.version import InvalidVersion, Version

OLDER_MINORS = 2
NEWER_MINORS = 1
AGENT_PRODUCT = "gpupool-agent"
CLI_PRODUCT = "gpupool-cli"


class Skew(Enum):
    SAME = "same"  # same major and minor
    SUPPORTED = "supported"  # within the window: works, said once
    REFUSED = "refused"
    UNKNOWN = "unknown"  # a version that does not parse, or none


@dataclass(frozen=True)
class SkewVerdict:
    skew: Skew
    server: str
    agent: str | None
    minors: int = 0  # agent's minor less the server's (same major)

    @property
    def accepted(self) -> bool:
        return self.skew is not Skew.REFUSED

    def explain(self) -> str:
        """One sentence for logs and the refusal's detail."""
        who = f"agent {self.agent or '(no version)'}, server {self.server}"
        if self.skew is Skew.SAME:
            return f"{who}: same release"
        if self.skew is Skew.UNKNOWN:
            return f"{who}: version not known, accepted"
        way = "newer" if self.minors > 0 else "older"
        if self.skew is Skew.SUPPORTED:
            return f"{who}: agent {abs(self.minors)} minor version(s) {way}, supported"
        if self.minors == 0:
            return f"{who}: another major version; servers and agents share a major release"
        return (
            f"{who}: agent {abs(self.minors)} minor version(s) {way}; supported: up to "
            f"{OLDER_MINORS} older or {NEWER_MINORS} newer — upgrade servers first, then agents"
        )


def parse(text: str | None) -> Version | None:
    if not text:
        return None
    try:
        return Version(text)
    except InvalidVersion:
        return None


def judge_skew(server: str, agent: str | None) -> SkewVerdict:
    """Whether a server of version ``server`` works with an agent of version ``agent``."""
    s, a = parse(server), parse(agent)
    if s is None or a is None:
        return SkewVerdict(Skew.UNKNOWN, server, agent)
    if s.major != a.major:
        return SkewVerdict(Skew.REFUSED, server, agent)
    minors = a.minor - s.minor
    if minors == 0:
        return SkewVerdict(Skew.SAME, server, agent)
    if -OLDER_MINORS <= minors <= NEWER_MINORS:
        return SkewVerdict(Skew.SUPPORTED, server, agent, minors)
    return SkewVerdict(Skew.REFUSED, server, agent, minors)


def user_agent(product: str, version: str) -> str:
    """The User-Agent an agent or the CLI sends: ``gpupool-agent/0.2.0``."""
    return f"{product}/{version}"


def version_in(user_agent_header: str | None, product: str) -> str | None:
    """The version a User-Agent header gives for ``product`` (first word), or None."""
    if not user_agent_header:
        return None
    first = user_agent_header.split()[0]
    name, _, version = first.partition("/")
    return version if name == product and version else None
