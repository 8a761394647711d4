"""A site's own small CA and the server certificates it signs (``gpupool cert``), for a
newcomer who wants HTTPS without being an expert: the CA's key stays on the control host, the
server's chain file carries the CA last, so ``gpupool node token create`` prints its pin and
joining agents trust it (``gpupool join --ca-hash``).

ECDSA P-256 keys (what browsers and Python accept everywhere), SHA-256 signatures; the server
certificate names every host and address agents and people use (subjectAltName: a certificate
without the name used is refused by every client)."""

import datetime as dt
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from gpupool.model import SpecError
from gpupool.model.cert_pins import fingerprint

CA_DAYS = 3650
CA_NAME = "ca.pem"
CA_KEY = "ca.key"
SERVER_CHAIN = "server.pem"
SERVER_KEY = "server.key"
SIGNS_CERTIFICATES = x509.KeyUsage(
    digital_signature=False,
    content_commitment=False,
    key_encipherment=False,
    data_encipherment=False,
    key_agreement=False,
    key_cert_sign=True,
    crl_sign=True,
    encipher_only=False,
    decipher_only=False,
)


@dataclass(frozen=True)
class Issued:
    chain: Path  # the server's certificate, then the CA's: --tls-cert
    key: Path  # --tls-key
    ca: Path  # what agents and the CLI trust (GPUPOOL_CA, --ca)
    ca_pin: str  # sha256:... of the CA (gpupool join --ca-hash)
    new_ca: bool
    not_after: dt.datetime


def _names(hosts: list[str]) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            if not host or any(c.isspace() or c in "/:@" for c in host):
                raise SpecError(f"host: {host!r} is neither a host name nor an address") from None
            names.append(x509.DNSName(host))
    return names


def _write_private(path: Path, data: bytes) -> None:
    """A key file readable by its owner only, from its first byte."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.chmod(path, 0o600)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _new_ca(folder: Path, now: dt.datetime) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "gpupool site CA")])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=CA_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(SIGNS_CERTIFICATES, critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
        .sign(key, hashes.SHA256())
    )
    _write_private(folder / CA_KEY, _key_pem(key))
    (folder / CA_NAME).write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return cert, key


def _load_ca(folder: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    try:
        cert = x509.load_pem_x509_certificate((folder / CA_NAME).read_bytes())
        key = serialization.load_pem_private_key((folder / CA_KEY).read_bytes(), None)
    except (OSError, ValueError) as exc:
        raise SpecError(f"{folder}: its CA does not read ({exc})") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise SpecError(f"{folder / CA_KEY}: not a key gpupool cert made (ECDSA)")
    return cert, key


def _signed(
    ca: tuple[x509.Certificate, ec.EllipticCurvePrivateKey],
    name: str,
    alt: list[x509.GeneralName],
    usage: x509.ObjectIdentifier,
    days: int,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    ca_cert, ca_key = ca
    now = dt.datetime.now(dt.UTC)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(min(now + dt.timedelta(days=days), ca_cert.not_valid_after_utc))
        .add_extension(x509.SubjectAlternativeName(alt), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    return cert, key


def _check_days(days: int) -> None:
    if not 1 <= days <= 3650:
        raise SpecError("days: between 1 and 3650")


def _write_pair(
    cert_path: Path, key_path: Path, pem: bytes, key: ec.EllipticCurvePrivateKey
) -> None:
    # the key first, then the certificate: a server reloading between the two writes sees a
    # new key with the old certificate at worst, refuses that pair and tries again (tls_reload)
    _write_private(key_path, _key_pem(key))
    tmp = cert_path.with_suffix(".pem.new")
    tmp.write_bytes(pem)
    tmp.replace(cert_path)


def issue(folder: Path, hosts: list[str], days: int) -> Issued:
    """A server certificate for ``hosts`` signed by the folder's CA (made first if the folder
    has none; kept otherwise, so agents' pins stay true when the certificate is renewed)."""
    if not hosts:
        raise SpecError("host: name at least one host or address agents will use")
    _check_days(days)
    names = _names(hosts)
    folder.mkdir(parents=True, exist_ok=True)
    have_ca = (folder / CA_NAME).exists() or (folder / CA_KEY).exists()
    ca = _load_ca(folder) if have_ca else _new_ca(folder, dt.datetime.now(dt.UTC))
    cert, key = _signed(ca, hosts[0], names, ExtendedKeyUsageOID.SERVER_AUTH, days)
    ca_pem = ca[0].public_bytes(serialization.Encoding.PEM)
    chain = folder / SERVER_CHAIN
    _write_pair(
        chain, folder / SERVER_KEY, cert.public_bytes(serialization.Encoding.PEM) + ca_pem, key
    )
    return Issued(
        chain=chain,
        key=folder / SERVER_KEY,
        ca=folder / CA_NAME,
        ca_pin=fingerprint(ca_pem.decode()),
        new_ca=not have_ca,
        not_after=cert.not_valid_after_utc,
    )


def issue_client(folder: Path, node: str, days: int) -> tuple[Path, Path, dt.datetime]:
    """A client certificate naming ``node`` (mutual TLS for its agent), signed by the folder's
    CA, written to ``clients/NODE.pem`` and ``.key``: the certificate file, its key, its end."""
    _check_days(days)
    if not (folder / CA_NAME).exists():
        raise SpecError(
            f"{folder}: no CA here yet; make it with the server's certificate first "
            "(gpupool cert create --host ...)"
        )
    names = _names([node])
    clients = folder / "clients"
    clients.mkdir(exist_ok=True)
    cert, key = _signed(_load_ca(folder), node, names, ExtendedKeyUsageOID.CLIENT_AUTH, days)
    pem, key_path = clients / f"{node}.pem", clients / f"{node}.key"
    _write_pair(pem, key_path, cert.public_bytes(serialization.Encoding.PEM), key)
    return pem, key_path, cert.not_valid_after_utc
