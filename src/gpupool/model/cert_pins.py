"""Pinning a server's certificate for a join: a PEM chain split into certificates, and each
one's SHA-256 fingerprint, written ``sha256:<hex>`` (what ``openssl x509 -noout -fingerprint
-sha256`` prints, without the colons). The admin's token command prints the pin of the top
certificate the server holds (its CA when the chain file carries it); a joining agent accepts
a chain only when the pin is one of its certificates, then verifies the server against it."""

import hashlib
import re
import ssl

PEM = re.compile(r"-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----", re.S)
PIN = re.compile(r"^sha256:[0-9a-f]{64}$")


def certificates(chain: str) -> list[str]:
    """The PEM certificates in ``chain``, in order."""
    return PEM.findall(chain)


def fingerprint(pem: str) -> str:
    return "sha256:" + hashlib.sha256(ssl.PEM_cert_to_DER_cert(pem)).hexdigest()


def normal_pin(pin: str) -> str:
    """A pin as typed (``sha256:AB:CD...`` or ``sha256:abcd...``), in the one form compared;
    ValueError naming the form when it is not one."""
    text = pin.strip().lower()
    if text.startswith("sha256:"):
        text = "sha256:" + text.removeprefix("sha256:").replace(":", "")
    if not PIN.match(text):
        raise ValueError(f"{pin!r} is not sha256:<64 hex digits> (a certificate's fingerprint)")
    return text


def pinned(chain: str, pin: str) -> bool:
    """Whether a certificate of ``chain`` has the fingerprint ``pin`` (normalised)."""
    return pin in {fingerprint(c) for c in certificates(chain)}
