"""SSH public keys: accepted types, refusals with clear messages, fingerprints exactly as
``ssh-keygen -lf`` prints them."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from app.accounts.sshkeys import SshKeyError, fingerprint_of_blob, parse_public_key
from tests.accounts.keys import DSA_PUB, private_openssh, private_pem, public_line

VALID = [
    ("ed25519", "ssh-ed25519", 256, "ED25519"),
    ("ecdsa256", "ecdsa-sha2-nistp256", 256, "ECDSA"),
    ("ecdsa384", "ecdsa-sha2-nistp384", 384, "ECDSA"),
    ("ecdsa521", "ecdsa-sha2-nistp521", 521, "ECDSA"),
    ("rsa2048", "ssh-rsa", 2048, "RSA"),
    ("rsa3072", "ssh-rsa", 3072, "RSA"),
]


@pytest.mark.parametrize(("kind", "key_type", "bits", "label"), VALID)
def test_valid_keys_of_each_type(kind: str, key_type: str, bits: int, label: str) -> None:
    line = public_line(kind, "ann@laptop")
    parsed = parse_public_key("  " + line + "\n")
    assert parsed.key_type == key_type and parsed.bits == bits and parsed.label == label
    assert parsed.comment == "ann@laptop"
    assert parsed.public_key == line.rsplit(" ", 1)[0]  # canonical form, comment dropped
    assert parsed.fingerprint.startswith("SHA256:") and not parsed.fingerprint.endswith("=")


@pytest.mark.skipif(shutil.which("ssh-keygen") is None, reason="ssh-keygen not installed")
@pytest.mark.parametrize(("kind", "key_type", "bits", "label"), VALID)
def test_fingerprint_matches_ssh_keygen(
    tmp_path: Path, kind: str, key_type: str, bits: int, label: str
) -> None:
    line = public_line(kind, "c")
    path = tmp_path / "k.pub"
    path.write_text(line + "\n")
    out = subprocess.run(
        ["ssh-keygen", "-lf", str(path)], capture_output=True, text=True, check=True
    ).stdout.split()
    parsed = parse_public_key(line)
    assert out[0] == str(parsed.bits)
    assert out[1] == parsed.fingerprint
    assert out[-1] == f"({label})"


def test_fingerprint_known_vector() -> None:
    # The SHA-256 of the empty string, as OpenSSH prints it (base64 without padding).
    assert fingerprint_of_blob(b"") == "SHA256:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU"


REFUSED = [
    ("", "Paste your public key"),
    ("   \n ", "Paste your public key"),
    ("hello world", "Unsupported key type"),
    ("ssh-ed25519", "does not look like an SSH public key"),
    ("ssh-ed25519 AAAA!!!notbase64", "not valid base64"),
    ("ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBad", "damaged"),
    ("ssh-rsa AAAAC3NzaC1lZDI1NTE5AAAAIA1GKNqe27ZDMMBnYe0fdU1m/rgM/df9BcGpDiDuKfIb", "damaged"),
    (DSA_PUB, "DSA keys are no longer secure"),
    ("ssh-dss AAAA", "DSA keys are no longer secure"),
    ("sk-ssh-ed25519@openssh.com AAAAGnNrLXNzaC1lZDI1NTE5QG9wZW5zc2guY29t", "Unsupported key type"),
]


@pytest.mark.parametrize(("text", "message"), REFUSED)
def test_refused_with_a_clear_message(text: str, message: str) -> None:
    with pytest.raises(SshKeyError) as e:
        parse_public_key(text)
    assert message in e.value.message


def test_short_rsa_is_refused_with_its_size() -> None:
    with pytest.raises(SshKeyError) as e:
        parse_public_key(public_line("rsa1024"))
    assert e.value.params == {"bits": 1024} and "at least 2048" in e.value.message


def test_two_keys_on_two_lines_are_refused() -> None:
    with pytest.raises(SshKeyError, match="single line"):
        parse_public_key(public_line("ed25519") + "\n" + public_line("ecdsa256"))


@pytest.mark.parametrize("text_of", [private_openssh, private_pem])
def test_private_keys_are_refused_and_never_echoed(text_of) -> None:  # type: ignore[no-untyped-def]
    text = text_of()
    with pytest.raises(SshKeyError) as e:
        parse_public_key(text)
    assert "PRIVATE key" in e.value.message
    body = "".join(text.splitlines()[1:-1])
    assert body[:40] not in str(e.value) and body[:40] not in repr(e.value.params)


def test_private_key_body_without_armour_is_refused() -> None:
    body = "".join(private_openssh().splitlines()[1:-1])  # "b3BlbnNzaC1rZXktdjE..." alone
    with pytest.raises(SshKeyError, match="PRIVATE key"):
        parse_public_key(body)
