"""The hand-written address code against the published test vectors: BIP-173 (bech32 and
segwit addresses), EIP-55 (mixed-case checksums) and Keccak-256."""

from __future__ import annotations

import pytest

from app.payments.addresses import bech32_decode, eip55, keccak256, segwit_address

# BIP-173, "Test vectors": valid bech32 strings.
VALID_BECH32 = [
    "A12UEL5L",
    "a12uel5l",
    "an83characterlonghumanreadablepartthatcontainsthenumber1andtheexcludedcharactersbio1tt5tgs",
    "abcdef1qpzry9x8gf2tvdw0s3jn54khce6mua7lmqqqxw",
    "11qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqc8247j",
    "split1checkupstagehandshakeupstreamerranterredcaperred2y9e3w",
    "?1ezyfcl",
]

# BIP-173: invalid bech32 strings (reason in the comment).
INVALID_BECH32 = [
    "\x201nwldj5",  # HRP character out of range
    "\x7f1axkwrx",  # HRP character out of range
    "\x801eym55h",  # HRP character out of range
    "an84characterslonghumanreadablepartthatcontainsthenumber1andtheexcludedcharactersbio1569pvx",
    "pzry9x0s0muk",  # no separator
    "1pzry9x0s0muk",  # empty HRP
    "x1b4n0q5v",  # invalid data character
    "li1dgmt3",  # too short checksum
    "de1lg7wt\xff",  # invalid character in checksum
    "A1G7SGD8",  # checksum calculated with the uppercase form of the HRP
    "10a06t8",  # empty HRP
    "1qzzfhee",  # empty HRP
]

# BIP-173: segwit addresses and their witness programs.
SEGWIT = [
    (
        "bc",
        0,
        "751e76e8199196d454941c45d1b3a323f1433bd6",
        "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4",
    ),
    (
        "tb",
        0,
        "1863143c14c5166804bd19203356da136c985678cd4d27a1b8c6329604903262",
        "tb1qrp33g0q5c5txsp9arysrx4k6zdkfs4nce4xj0gdcccefvpysxf3q0sl5k7",
    ),
    (
        "tb",
        0,
        "000000c4a5cad46221b2a187905e5266362b99d5e91c6ce24d165dab93e86433",
        "tb1qqqqqp399et2xygdj5xreqhjjvcmzhxw4aywxecjdzew6hylgvsesrxh6hy",
    ),
]

# EIP-55, "Test Cases".
EIP55 = [
    "0x52908400098527886E0F7030069857D2E4169EE7",
    "0x8617E340B3D01FA5F11F306F4090FD50E238070D",
    "0xde709f2102306220921060314715629080e2fb77",
    "0x27b1fdb04752bbc536007a920d24acb045561c26",
    "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
    "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359",
    "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB",
    "0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb",
]


@pytest.mark.parametrize("text", VALID_BECH32)
def test_bip173_valid_strings_decode(text: str) -> None:
    decoded = bech32_decode(text)
    assert decoded is not None
    assert decoded[0] == text[: text.rfind("1")].lower()


@pytest.mark.parametrize("text", INVALID_BECH32)
def test_bip173_invalid_strings_are_refused(text: str) -> None:
    assert bech32_decode(text) is None


@pytest.mark.parametrize(("hrp", "version", "program", "address"), SEGWIT)
def test_bip173_segwit_addresses(hrp: str, version: int, program: str, address: str) -> None:
    assert segwit_address(hrp, version, bytes.fromhex(program)) == address
    assert bech32_decode(address.upper()) is not None


@pytest.mark.parametrize("address", EIP55)
def test_eip55_checksums(address: str) -> None:
    assert eip55(address.lower()) == address
    assert eip55(address.upper().replace("0X", "0x")) == address


def test_keccak256_known_digests() -> None:
    assert keccak256(b"").hex() == (
        "c5d2460186f7233c927e7db2dcc703c0e500b653ca82273b7bfad8045d85a470"
    )
    assert keccak256(b"abc").hex() == (
        "4e03657aea45a94fc7d47ba826c8d667c0d1e6e33a64a036ec44f58fa12d6c45"
    )
