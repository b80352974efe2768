"""Email normal form and validation."""

from __future__ import annotations

import pytest

from app.accounts.emails import EmailError, looks_like_email, normalise_email


@pytest.mark.parametrize(
    ("raw", "normal"),
    [
        ("ann@example.com", "ann@example.com"),
        ("  Ann.Lee+gpu@Example.COM \n", "ann.lee+gpu@example.com"),
        ("o'brien@mail.example.co.uk", "o'brien@mail.example.co.uk"),
        ("user@bücher.example", "user@xn--bcher-kva.example"),
        ("x@sub-domain.example.org", "x@sub-domain.example.org"),
    ],
)
def test_normal_form(raw: str, normal: str) -> None:
    assert normalise_email(raw) == normal


@pytest.mark.parametrize(
    "raw",
    [
        "",
        "   ",
        "plain",
        "a@b",
        "two@@example.com",
        "a@b@example.com",
        ".dot@example.com",
        "dot.@example.com",
        "do..t@example.com",
        "sp ace@example.com",
        "tab\t@example.com",
        "nul\x00@example.com",
        '"quoted"@example.com',
        "ip@[127.0.0.1]",
        "x@-bad.example.com",
        "x@example.c0m",
        "x@exa_mple.com",
        ("a" * 65) + "@example.com",
        "a@" + ("b" * 250) + ".com",
    ],
)
def test_invalid_addresses_are_refused(raw: str) -> None:
    with pytest.raises(EmailError):
        normalise_email(raw)
    assert looks_like_email(raw) is None
