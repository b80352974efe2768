"""Issue 19, defect 10 (part): pasting a private key gives one clear error, not two
contradictory ones, and the key is never echoed back."""

from __future__ import annotations

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey


def test_a_pasted_private_key_gets_one_message() -> None:
    from app.orders import service

    private = (
        Ed25519PrivateKey.generate()
        .private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.OpenSSH,
            serialization.NoEncryption(),
        )
        .decode()
    )
    draft, errors = service.parse_draft(
        {"sku": "hgx-h100", "nodes": "1", "image": "ubuntu-24.04-cuda", "new_key_text": private}
    )
    assert set(errors) == {"new_key_text"}, errors
    assert "private" in errors["new_key_text"].lower()
    assert draft.new_key_text == ""
