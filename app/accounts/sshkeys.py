"""Parse SSH public keys with ``cryptography`` and fingerprint them like ``ssh-keygen -lf``.

Accepted: ssh-ed25519, ecdsa-sha2-nistp256/384/521, ssh-rsa of 2048 bits or more.
Refused with a clear message: DSA, short RSA, anything unparsable, and private keys (which
are detected before any parsing and never stored, echoed, logged or audited: the
messages below never include the pasted text).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from dataclasses import dataclass

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives.asymmetric import dsa, ec, ed25519, rsa
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    PublicFormat,
    load_ssh_public_key,
)

from app.errors import N_

MAX_KEY_TEXT = 16_384
MIN_RSA_BITS = 2048
MAX_RSA_BITS = 16_384
_ECDSA = {
    "secp256r1": ("ecdsa-sha2-nistp256", 256),
    "secp384r1": ("ecdsa-sha2-nistp384", 384),
    "secp521r1": ("ecdsa-sha2-nistp521", 521),
}
_PRIVATE_MARKERS = re.compile(
    r"PRIVATE KEY|PuTTY-User-Key-File|openssh-key-v1|b3BlbnNzaC1rZXktdjE", re.IGNORECASE
)


class SshKeyError(ValueError):
    """A key we refuse; ``message`` is a user-facing msgid (never contains the input)."""

    def __init__(self, message: str, **params: object) -> None:
        super().__init__(message)
        self.message = message
        self.params = params


@dataclass(frozen=True)
class ParsedKey:
    key_type: str  # ssh-ed25519, ecdsa-sha2-nistp256, ssh-rsa
    bits: int
    public_key: str  # canonical "type base64" without the comment
    fingerprint: str  # "SHA256:..." exactly as ssh-keygen -lf prints it
    comment: str

    @property
    def label(self) -> str:
        return {"ssh-ed25519": "ED25519", "ssh-rsa": "RSA"}.get(
            self.key_type, "ECDSA" if self.key_type.startswith("ecdsa") else self.key_type
        )


def looks_private(text: str) -> bool:
    return bool(_PRIVATE_MARKERS.search(text))


def fingerprint_of_blob(blob: bytes) -> str:
    digest = hashlib.sha256(blob).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def parse_public_key(text: str) -> ParsedKey:
    """Parse one OpenSSH public key line; raise ``SshKeyError`` with a clear message."""
    if text is None or not text.strip():
        raise SshKeyError(N_("Paste your public key (the contents of a .pub file)."))
    if looks_private(text):
        raise SshKeyError(
            N_(
                "That is a PRIVATE key. Never share it: we did not keep it. "
                "Paste the public key instead (the .pub file, starting with ssh-ed25519, "
                "ecdsa-sha2-… or ssh-rsa)."
            )
        )
    if len(text) > MAX_KEY_TEXT:
        raise SshKeyError(N_("That is too long to be an SSH public key."))
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    if len(lines) != 1:
        raise SshKeyError(N_("Paste one public key on a single line."))
    parts = lines[0].split(None, 2)
    if len(parts) < 2:
        raise SshKeyError(
            N_(
                "This does not look like an SSH public key. It should start with ssh-ed25519, ecdsa-sha2-… or ssh-rsa."
            )
        )
    key_type, b64 = parts[0], parts[1]
    comment = parts[2].strip() if len(parts) > 2 else ""
    if key_type in ("ssh-dss", "ssh-dsa"):
        raise SshKeyError(
            N_("DSA keys are no longer secure and are not accepted. Use an ed25519 key.")
        )
    if key_type not in ("ssh-ed25519", "ssh-rsa", *(t for t, _ in _ECDSA.values())):
        raise SshKeyError(
            N_(
                "Unsupported key type. Use ssh-ed25519 (recommended), ecdsa-sha2-nistp256/384/521 or ssh-rsa of at least 2048 bits."
            )
        )
    try:
        blob = base64.b64decode(b64.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError):
        raise SshKeyError(
            N_("The key data is damaged (it is not valid base64). Copy the whole line again.")
        ) from None
    try:
        key = load_ssh_public_key(f"{key_type} {b64}".encode("ascii"))
    except (ValueError, UnsupportedAlgorithm, TypeError):
        raise SshKeyError(
            N_("The key data is damaged or incomplete. Copy the whole line again.")
        ) from None

    if isinstance(key, dsa.DSAPublicKey):
        raise SshKeyError(
            N_("DSA keys are no longer secure and are not accepted. Use an ed25519 key.")
        )
    if isinstance(key, ed25519.Ed25519PublicKey):
        bits = 256
    elif isinstance(key, ec.EllipticCurvePublicKey):
        if key.curve.name not in _ECDSA:
            raise SshKeyError(N_("Unsupported ECDSA curve. Use nistp256, nistp384 or nistp521."))
        bits = _ECDSA[key.curve.name][1]
    elif isinstance(key, rsa.RSAPublicKey):
        bits = key.key_size
        if bits < MIN_RSA_BITS:
            raise SshKeyError(
                N_("This RSA key has only {bits} bits; we need at least 2048 (ed25519 is better)."),
                bits=bits,
            )
        if bits > MAX_RSA_BITS:
            raise SshKeyError(N_("This RSA key is larger than 16384 bits; we cannot use it."))
    else:  # pragma: no cover - load_ssh_public_key returns only the types above
        raise SshKeyError(N_("Unsupported key type."))

    canonical = key.public_bytes(Encoding.OpenSSH, PublicFormat.OpenSSH).decode("ascii")
    canon_type, canon_b64 = canonical.split(" ", 1)
    if canon_type != key_type or base64.b64decode(canon_b64) != blob:
        # Trailing bytes or a type that does not match the data: refuse rather than guess.
        raise SshKeyError(N_("The key data is damaged or incomplete. Copy the whole line again."))
    return ParsedKey(
        key_type=key_type,
        bits=bits,
        public_key=canonical,
        fingerprint=fingerprint_of_blob(blob),
        comment=comment[:80],
    )
