"""Pins as a joining server compares them: one form however they are typed, and a chain
accepted only when one of its certificates has the pinned fingerprint."""

import base64
import hashlib

import pytest

from gpupool.model.cert_pins import certificates, fingerprint, normal_pin, pinned


def pem(der: bytes) -> str:
    body = base64.encodebytes(der).decode()
    return f"-----BEGIN CERTIFICATE-----\n{body}-----END CERTIFICATE-----\n"


LEAF, CA = pem(b"leaf certificate bytes"), pem(b"ca certificate bytes")


def test_a_chain_splits_into_its_certificates_and_each_has_its_fingerprint():
    chain = LEAF + "junk between\n" + CA
    assert certificates(chain) == [LEAF.strip(), CA.strip()]
    assert fingerprint(CA) == "sha256:" + hashlib.sha256(b"ca certificate bytes").hexdigest()
    assert pinned(chain, fingerprint(CA)) and pinned(chain, fingerprint(LEAF))
    assert not pinned(LEAF, fingerprint(CA)) and not pinned("", fingerprint(CA))


def test_a_pin_reads_as_openssl_prints_it_or_as_gpupool_does():
    digest = hashlib.sha256(b"x").hexdigest()
    colons = ":".join(digest[i : i + 2] for i in range(0, 64, 2)).upper()
    assert normal_pin(f"SHA256:{colons}") == normal_pin(f"sha256:{digest}") == f"sha256:{digest}"


@pytest.mark.parametrize("bad", ["", "sha256:", "md5:" + "0" * 32, "sha256:" + "g" * 64, "0" * 64])
def test_a_pin_that_is_not_one_is_refused_saying_the_form(bad):
    with pytest.raises(ValueError, match="sha256:<64 hex digits>"):
        normal_pin(bad)
