"""Test keys, generated once per run with ``cryptography`` (never real secrets)."""

from __future__ import annotations

from functools import cache

from cryptography.hazmat.primitives import serialization as ser
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

# A 1024-bit DSA public key (cryptography is deprecating DSA serialisation, so it is fixed).
DSA_PUB = (
    "ssh-dss AAAAB3NzaC1kc3MAAACBANAB8arTjw+MHA7eJHrSzit7decC543blZqRTRlzpSgjVLjHFqtS9Cy0j4cZ9BMB"
    "DfPpcwj4t9rMZsfrsRMobcpLxqnHDthflympGpvk5E99CeRPRZOqJHHxHz9SlgKCOc/dojDNEli7sbuWPah0aB5pWxM"
    "fOl04L9/kVQzqmdhhAAAAFQC3sc7Li+v5tQs4gewVNOKz52Nx1QAAAIAKj/mpjKsXJykl0dF/27SsGNGV3tuEkDRgJ1"
    "fUscD3xf0koKg7ahGL3ePjxeKZInlaJxnHHL7Hgjg4+kFXLVQkVJhzDcdUFgx7b9v7pJ2lnKzHqzHqEkPrHdMWXm97R"
    "T85VL+3aD68os7PZmG0q2dzEwhy2HuVt5SoCBYGt4I35AAAAIACRiIBDu8xHovbSnP4tFkTy6GexjIKNjTZZMM0Q9Iy"
    "zROR4mdhsHaoNaJ8z6QDo23Fd/tsq9Na1JMo+mOHfV6DOcK89OsEjfTTn92fklew5u9fkRKKcqwLhP0aYr1OzlvT70Y"
    "roh3i2n1d/QTXXXPeMU4/c+4OULs+ipVSrAckPw== old@box"
)


@cache
def private(kind: str) -> object:
    if kind == "ed25519":
        return ed25519.Ed25519PrivateKey.generate()
    if kind.startswith("ecdsa"):
        curve = {"ecdsa256": ec.SECP256R1(), "ecdsa384": ec.SECP384R1(), "ecdsa521": ec.SECP521R1()}
        return ec.generate_private_key(curve[kind])
    bits = int(kind.removeprefix("rsa"))
    return rsa.generate_private_key(public_exponent=65537, key_size=bits)


def public_line(kind: str, comment: str = "me@laptop") -> str:
    key = private(kind).public_key()  # type: ignore[attr-defined]
    text = key.public_bytes(ser.Encoding.OpenSSH, ser.PublicFormat.OpenSSH).decode()
    return f"{text} {comment}".strip()


def private_openssh(kind: str = "ed25519") -> str:
    return (
        private(kind)
        .private_bytes(  # type: ignore[attr-defined, no-any-return]
            ser.Encoding.PEM, ser.PrivateFormat.OpenSSH, ser.NoEncryption()
        )
        .decode()
    )


def private_pem(kind: str = "rsa2048") -> str:
    return (
        private(kind)
        .private_bytes(  # type: ignore[attr-defined, no-any-return]
            ser.Encoding.PEM, ser.PrivateFormat.PKCS8, ser.NoEncryption()
        )
        .decode()
    )
