"""Every TLS file the hop is given, checked when its configuration is loaded.

gRPC's C core reads the files only when a port is bound or a channel connects, and then says
"Failed to bind to address" or nothing useful; so each file is read here first, with Python's own
OpenSSL, and a file that cannot serve is refused with its setting, its path and what is wrong with
it: missing, a directory, unreadable, empty, binary (DER, not PEM), a private key where a
certificate belongs or the reverse, an encrypted key, a certificate that does not parse, a key that
does not belong to its certificate. :class:`TlsFileError` carries the one line.
"""

from __future__ import annotations

import re
import ssl
from pathlib import Path

_CERT_BEGIN = "-----BEGIN CERTIFICATE-----"
_KEY_MARK = "PRIVATE KEY-----"


class TlsFileError(ValueError):
    """A TLS file that cannot be used; the message names the setting and the file."""


def _why(error: ssl.SSLError) -> str:
    """OpenSSL's reason without the C source line (``(_ssl.c:4020)``)."""
    return re.sub(r"\s*\(_ssl\.c:\d+\)", "", str(error.reason or error.strerror or error)).strip()


def _text(path: Path, setting: str, expected: str) -> str:
    if not path.exists():
        raise TlsFileError(f"{setting}: file {path} does not exist")
    if path.is_dir():
        raise TlsFileError(f"{setting}: {path} is a directory; expected {expected}")
    if not path.is_file():  # a FIFO or a device would block the read, or never end
        raise TlsFileError(f"{setting}: {path} is not a regular file; expected {expected}")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TlsFileError(f"{setting}: cannot read {path}: {exc.strerror or exc}") from None
    if not data.strip():
        raise TlsFileError(f"{setting}: {path} is empty; expected {expected}")
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        raise TlsFileError(
            f"{setting}: {path} is binary, not PEM text (a DER file? convert it: "
            "openssl x509 -inform der -in FILE -out FILE.pem); expected " + expected
        ) from None
    if "-----BEGIN " not in text:
        raise TlsFileError(
            f"{setting}: {path} holds no PEM block (-----BEGIN ...); expected {expected}"
        )
    return text


def check_certificates(path: Path, setting: str) -> None:
    """A PEM file of one or more certificates (a certificate chain, or the CAs to trust)."""
    expected = "a PEM certificate (-----BEGIN CERTIFICATE-----)"
    text = _text(path, setting, expected)
    if _CERT_BEGIN not in text:
        held = "a private key" if _KEY_MARK in text else "no certificate"
        raise TlsFileError(
            f"{setting}: {path} holds {held}, not a certificate; expected {expected}"
        )
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(cadata=text)
    except ssl.SSLError as exc:
        raise TlsFileError(
            f"{setting}: {path}: its certificate cannot be read (OpenSSL: {_why(exc)})"
        ) from None


def check_key(path: Path, setting: str) -> None:
    """A PEM private key, not encrypted (gRPC has no way to ask for its password)."""
    expected = "a PEM private key (-----BEGIN PRIVATE KEY-----)"
    text = _text(path, setting, expected)
    if _KEY_MARK not in text:
        held = "a certificate" if _CERT_BEGIN in text else "no private key"
        raise TlsFileError(
            f"{setting}: {path} holds {held}, not a private key; expected {expected}"
        )
    if "ENCRYPTED" in text:
        raise TlsFileError(
            f"{setting}: {path} is an encrypted private key; give it unencrypted "
            "(openssl pkey -in FILE -out FILE.key): nothing can ask for its password"
        )


def check_pair(cert: Path, key: Path, setting: str) -> None:
    """``cert`` and ``key`` each readable, and the key the certificate's own."""
    check_certificates(cert, f"{setting}.cert_file")
    check_key(key, f"{setting}.key_file")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_cert_chain(cert, key, password=lambda: b"")
    except ssl.SSLError as exc:
        if "KEY_VALUES_MISMATCH" in str(exc):
            raise TlsFileError(
                f"{setting}: key_file {key} is not the private key of cert_file {cert}"
            ) from None
        raise TlsFileError(
            f"{setting}: cert_file {cert} with key_file {key} cannot be used ({exc.reason or exc})"
        ) from None
