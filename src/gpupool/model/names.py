"""What a team (tenant) may be called. A zh product's teams are 研发部 and 推理组, not only
``algorithm`` (issue 59): a team name is letters of any script, digits 0-9, '.', '_' and
'-', starting with a letter or digit, at most 100 characters — the ASCII names allowed before,
and the same in any language.

What it may not hold, and why: spaces, '/', ':', quotes and other punctuation or symbols (a
name is a URL path segment, a file name of its invoices, a Prometheus label, a command-line
word); control and invisible characters; compatibility forms (full-width ``ＡＢＣ``, circled
or ligature letters), which read as another name (``ABC``) — a name must be what Unicode's
NFKC normalisation leaves it, so two teams never differ by a form the eye cannot tell.
Combining marks (Devanagari, Thai vowel signs) may follow a letter. Where a name must be
ASCII — a Unix user, a cgroup folder, a network namespace on a node — the agent hashes it
(``gpupool.agent.identity.unix_name``)."""

import unicodedata

MAX_TENANT_NAME = 100
PUNCTUATION = "._-"
RULE = (
    "a team name is letters (any script), digits 0-9, '.', '_' and '-', starting with a "
    "letter or digit"
)


def _letter(ch: str) -> bool:
    return unicodedata.category(ch).startswith("L")


def _digit(ch: str) -> bool:
    return "0" <= ch <= "9"


def check_tenant_name(name: str) -> str:
    """``name`` if it may name a team, else ValueError saying what is wrong with it."""
    if not name:
        raise ValueError("must not be empty")
    if len(name) > MAX_TENANT_NAME:
        raise ValueError(f"at most {MAX_TENANT_NAME} characters ({len(name)} given)")
    plain = unicodedata.normalize("NFKC", name)
    if plain != name:
        raise ValueError(f"{name!r}: write it as {plain!r} ({RULE}, in their plain form)")
    if not (_letter(name[0]) or _digit(name[0])):
        raise ValueError(f"{name!r}: {RULE}")
    for ch in name[1:]:
        if _letter(ch) or _digit(ch) or ch in PUNCTUATION:
            continue
        if unicodedata.category(ch) in ("Mn", "Mc"):  # a vowel sign on a letter
            continue
        shown = repr(ch) if ch.isprintable() and not ch.isspace() else f"U+{ord(ch):04X}"
        if ch == " ":
            shown = "' '"
        raise ValueError(f"{name!r}: {RULE}; {shown} is not one of them")
    return name
