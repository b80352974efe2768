"""Deposit addresses formatted like real ones (simulated: no one holds these keys).

- Bitcoin: a native SegWit v0 P2WPKH address (BIP-173 bech32 with its checksum), ``bc1q…``.
- Ethereum and ERC-20 tokens: a 20-byte address with the EIP-55 mixed-case checksum.
Each is derived from a wallet secret and the invoice id (HMAC-SHA256), so it is
deterministic and different per invoice. Also the payment URIs (BIP-21, EIP-681).
"""

from __future__ import annotations

import hashlib
import hmac

from Crypto.Hash import keccak

from app.payments.rates import CURRENCIES, format_units

# --- bech32 (BIP-173) --------------------------------------------------------------------

CHARSET = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"


def _polymod(values: list[int]) -> int:
    gen = (0x3B6A57B2, 0x26508E6D, 0x1EA119FA, 0x3D4233DD, 0x2A1462B3)
    chk = 1
    for v in values:
        top = chk >> 25
        chk = (chk & 0x1FFFFFF) << 5 ^ v
        for i in range(5):
            chk ^= gen[i] if ((top >> i) & 1) else 0
    return chk


def _hrp_expand(hrp: str) -> list[int]:
    return [ord(x) >> 5 for x in hrp] + [0] + [ord(x) & 31 for x in hrp]


def bech32_verify(hrp: str, data: list[int]) -> bool:
    return _polymod(_hrp_expand(hrp) + data) == 1


def bech32_encode(hrp: str, data: list[int]) -> str:
    values = _hrp_expand(hrp) + data
    mod = _polymod(values + [0] * 6) ^ 1
    checksum = [(mod >> 5 * (5 - i)) & 31 for i in range(6)]
    return hrp + "1" + "".join(CHARSET[d] for d in data + checksum)


def bech32_decode(addr: str) -> tuple[str, list[int]] | None:
    if any(not 33 <= ord(c) <= 126 for c in addr):  # BIP-173: printable US-ASCII only
        return None
    if addr.lower() != addr and addr.upper() != addr:
        return None
    addr = addr.lower()
    pos = addr.rfind("1")
    if pos < 1 or pos + 7 > len(addr) or len(addr) > 90:
        return None
    if any(c not in CHARSET for c in addr[pos + 1 :]):
        return None
    hrp, data = addr[:pos], [CHARSET.find(c) for c in addr[pos + 1 :]]
    if not bech32_verify(hrp, data):
        return None
    return hrp, data[:-6]


def convertbits(data: bytes | list[int], frombits: int, tobits: int, pad: bool = True) -> list[int]:
    acc = bits = 0
    ret: list[int] = []
    maxv = (1 << tobits) - 1
    for value in data:
        acc = (acc << frombits) | value
        bits += frombits
        while bits >= tobits:
            bits -= tobits
            ret.append((acc >> bits) & maxv)
    if pad and bits:
        ret.append((acc << (tobits - bits)) & maxv)
    return ret


def segwit_address(hrp: str, witver: int, program: bytes) -> str:
    return bech32_encode(hrp, [witver] + convertbits(program, 8, 5))


# --- Keccak-256 (the pre-standard SHA-3 Ethereum uses; hashlib.sha3_256 pads differently) --


def keccak256(data: bytes) -> bytes:
    """Keccak-256 as Ethereum uses it (pycryptodome's, the original Keccak padding)."""
    return keccak.new(digest_bits=256, data=data).digest()


def eip55(address_hex: str) -> str:
    """Mixed-case checksum encoding of a 40-hex-digit address (EIP-55)."""
    h = address_hex.lower().removeprefix("0x")
    if len(h) != 40 or any(c not in "0123456789abcdef" for c in h):
        raise ValueError("not a 20-byte hex address")
    digest = keccak256(h.encode("ascii")).hex()
    return "0x" + "".join(c.upper() if int(digest[i], 16) >= 8 else c for i, c in enumerate(h))


# --- per-invoice addresses and payment URIs -----------------------------------------------


def deposit_address(secret: bytes, currency: str, invoice_ref: str) -> str:
    chain = CURRENCIES[currency].chain
    program = hmac.new(secret, f"{chain}:{invoice_ref}".encode(), hashlib.sha256).digest()[:20]
    if chain == "bitcoin":
        return segwit_address("bc", 0, program)
    return eip55(program.hex())


def payment_uri(currency: str, address: str, units: int) -> str:
    """BIP-21 for bitcoin; EIP-681 for ether (value in wei) and ERC-20 ``transfer``."""
    c = CURRENCIES[currency]
    if c.chain == "bitcoin":
        return f"bitcoin:{address}?amount={format_units(units, c.decimals)}"
    if not c.token_contract:
        return f"ethereum:{address}@1?value={units}"
    return f"ethereum:{c.token_contract}@1/transfer?address={address}&uint256={units}"
