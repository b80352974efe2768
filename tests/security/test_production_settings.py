"""Finding 1: production never runs the payment simulator or a public webhook secret, and
the environment the Dockerfile and compose.yaml set is a safe production configuration."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi.testclient import TestClient
from pydantic import ValidationError
from sqlmodel import Session

from app.clock import FixedClock
from app.main import create_app
from app.settings import TEST_BYPASSES, Settings

ROOT = Path(__file__).resolve().parents[2]
SECRET = "prod-secret-0123456789-abcdefghijklmnopqrstuv"
BTCPAY = {
    "payment_provider": "btcpay",
    "btcpay_url": "https://btcpay.example",
    "btcpay_store_id": "store1",
    "btcpay_api_key": "key1",
}


def prod(**kw: Any) -> Settings:
    base: dict[str, Any] = {
        "environment": "production",
        "secret_key": SECRET,
        "webhook_secret": "webhook-secret-0123456789-abcdef",
        "simulation": False,
        "base_url": "https://gpunodes.example",
        "seller_name": "Example Compute Ltd.",
        "seller_name_zh": "",
        "seller_address_en": "1 Example Road, Singapore",
        "seller_address_zh": "",
        "seller_tax_id": "UEN 201912345K",
        **BTCPAY,
    }
    base.update(kw)
    return Settings(_env_file=None, **base)  # type: ignore[call-arg]


def test_a_real_production_configuration_is_accepted() -> None:
    s = prod()
    assert not s.simulation and s.payment_provider == "btcpay"


def test_production_refuses_the_simulator() -> None:
    with pytest.raises(ValidationError, match="APP_SIMULATION is on in production"):
        prod(simulation=True)


@pytest.mark.parametrize("secret", ["dev-webhook-secret", "change-this-webhook-secret", "short"])
def test_production_refuses_a_public_or_short_webhook_secret(secret: str) -> None:
    with pytest.raises(ValidationError, match="APP_WEBHOOK_SECRET"):
        prod(webhook_secret=secret)


def test_production_without_simulation_needs_a_real_provider() -> None:
    with pytest.raises(ValidationError, match="APP_PAYMENT_PROVIDER=btcpay"):
        prod(payment_provider="simulated")
    with pytest.raises(ValidationError, match="APP_BTCPAY_API_KEY"):
        prod(btcpay_api_key="")


@pytest.mark.parametrize(
    "secret", [" " * 32, "a" * 32, "ab" * 24, "01234567801234567801234567801234"]
)
def test_production_refuses_a_low_entropy_secret_key(secret: str) -> None:
    with pytest.raises(ValidationError, match="APP_SECRET_KEY has fewer than 10 different"):
        prod(secret_key=secret)


@pytest.mark.parametrize("secret", ["a" * 16, "abababababababababab", " " * 20])
def test_production_refuses_a_low_entropy_webhook_secret(secret: str) -> None:
    with pytest.raises(ValidationError, match="APP_WEBHOOK_SECRET"):
        prod(webhook_secret=secret)


@pytest.mark.parametrize("proxies", ["0.0.0.0/0", "10.0.0.1,::/0", "0.0.0.0/0.0.0.0"])
def test_production_refuses_trusting_every_address_as_a_proxy(proxies: str) -> None:
    with pytest.raises(ValidationError, match="every client could then choose its own address"):
        prod(trusted_proxies=proxies)


@pytest.mark.parametrize(
    "base_url",
    [
        "",
        "gpunodes.example",
        "ftp://gpunodes.example",
        "https://",
        "http://127.0.0.1:8000",
        "http://gpunodes.example",
        "https://localhost",
    ],
)
def test_production_refuses_a_missing_or_malformed_base_url(base_url: str) -> None:
    with pytest.raises(ValidationError, match="APP_BASE_URL"):
        prod(base_url=base_url)


def test_production_refuses_a_plain_http_provider_off_loopback() -> None:
    with pytest.raises(ValidationError, match="APP_BTCPAY_URL must use https"):
        prod(btcpay_url="http://btcpay.example")
    with pytest.raises(ValidationError, match="APP_BTCPAY_URL is not an http"):
        prod(btcpay_url="btcpay.example")
    assert prod(btcpay_url="http://127.0.0.1:23000").btcpay_url  # a provider on this machine


def test_the_test_environment_runs_production_checks_except_the_named_bypasses() -> None:
    def test_env(**kw: Any) -> Settings:
        base: dict[str, Any] = {
            "environment": "test",
            "secret_key": SECRET,
            "webhook_secret": "webhook-secret-0123456789-abcdef",
        }
        base.update(kw)
        return Settings(_env_file=None, **base)  # type: ignore[call-arg]

    # the bypasses tests need, each named with its reason
    assert set(TEST_BYPASSES) == {
        "placeholder_secret_key",
        "simulation",
        "payment_provider",
        "public_webhook_secret",
        "base_url",
        "demo_seller",
    }
    assert test_env(simulation=True, base_url="http://127.0.0.1:8000").simulation
    for bad, match in (
        ({"secret_key": "a" * 40}, "APP_SECRET_KEY"),
        ({"secret_key": "short"}, "APP_SECRET_KEY"),
        ({"webhook_secret": "a" * 20}, "APP_WEBHOOK_SECRET"),
        ({"trusted_proxies": "0.0.0.0/0"}, "APP_TRUSTED_PROXIES"),
        ({"seller_tax_id": " "}, "APP_SELLER_TAX_ID"),
        ({**BTCPAY, "simulation": False, "btcpay_url": "http://btcpay.example"}, "https"),
    ):
        with pytest.raises(ValidationError, match=match):
            test_env(**bad)


def test_the_api_says_simulated_only_for_the_simulator(
    db_url: str, clock: FixedClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.accounts.models import User
    from app.accounts.security import create_api_token, hash_password
    from app.payments.models import Invoice

    for simulated, settings in (
        (
            True,
            prod(
                database_url=db_url,
                simulation=True,
                force_simulation=True,
                payment_provider="simulated",
                allowed_hosts="testserver",
            ),
        ),
        (False, prod(database_url=db_url, allowed_hosts="testserver")),
    ):
        app = create_app(settings, clock=clock)
        try:
            with Session(app.state.engine) as s:
                user = User(
                    email=f"api{simulated}@example.com",
                    password_hash=hash_password("x" * 12),
                    created_at=clock.now(),
                )
                s.add(user)
                s.flush()
                inv = Invoice(
                    provider_id=f"inv-{simulated}",
                    user_id=user.id,
                    amount_cents=100_00,
                    currency="USDC",
                    decimals=6,
                    rate="1",
                    due_units="100000000",
                    address="0x" + "1" * 40,
                    payment_uri="ethereum:0x0",
                    created_at=clock.now(),
                    expires_at=clock.now(),
                    monitoring_until=clock.now(),
                    updated_at=clock.now(),
                )
                s.add(inv)
                _row, raw = create_api_token(s, user, "t", clock.now())
                s.commit()
                invoice_id = inv.id
            with TestClient(app, base_url="https://testserver") as c:
                r = c.get(
                    f"/api/v1/topups/{invoice_id}", headers={"Authorization": f"Bearer {raw}"}
                )
            assert r.status_code == 200 and r.json()["simulated"] is simulated
        finally:
            app.state.engine.dispose()


def test_malformed_trusted_proxies_refused() -> None:
    with pytest.raises(ValidationError, match="APP_TRUSTED_PROXIES"):
        prod(trusted_proxies="*")


def test_forced_simulation_in_production_says_so_on_every_page(
    db_url: str, clock: FixedClock
) -> None:
    settings = prod(
        database_url=db_url,
        simulation=True,
        force_simulation=True,
        payment_provider="simulated",
        allowed_hosts="testserver",
    )
    app = create_app(settings, clock=clock)
    try:
        with TestClient(app, base_url="https://testserver") as c:
            for path in ("/", "/login", "/nodes"):
                r = c.get(path)
                assert r.status_code == 200
                assert "payments are simulated" in r.text
    finally:
        app.state.engine.dispose()


def _compose_env() -> dict[str, str]:
    """The app service's environment as compose would pass it, with the operator's
    required variables set and ``${VAR:-default}`` resolved to the default."""
    given = {
        "APP_SECRET_KEY": "compose-secret-0123456789-abcdefghijklmnopqrstuvwxyz",
        "APP_BASE_URL": "https://gpunodes.example.com",
        "APP_WEBHOOK_SECRET": "a-webhook-secret-from-btcpay-0123",
        "APP_BTCPAY_URL": "https://btcpay.example.com",
        "APP_BTCPAY_STORE_ID": "Store123",
        "APP_BTCPAY_API_KEY": "apikey123",
        "APP_SELLER_NAME": "Example Compute Ltd.",
        "APP_SELLER_ADDRESS_EN": "1 Example Road, Singapore",
        "APP_SELLER_TAX_ID": "UEN 201912345K",
    }
    doc = yaml.safe_load((ROOT / "compose.yaml").read_text())
    env = doc["services"]["app"]["environment"]

    def resolve(value: Any) -> str:
        def sub(m: re.Match[str]) -> str:
            name, op, arg = m.group(1), m.group(2) or "", m.group(3) or ""
            if name in given:
                return given[name]
            if op == ":?":
                raise AssertionError(f"compose requires {name}: {arg}")
            return arg

        return re.sub(r"\$\{([A-Z_]+)(:[-?])?([^}]*)\}", sub, str(value))

    return {k: resolve(v) for k, v in env.items()}


def _dockerfile_env() -> dict[str, str]:
    text = (ROOT / "Dockerfile").read_text().replace("\\\n", " ")
    runtime = text[text.index("AS runtime") :]
    env: dict[str, str] = {}
    for line in runtime.splitlines():
        if line.startswith("ENV "):
            for m in re.finditer(r'([A-Z_]+)=("[^"]*"|\S+)', line[4:]):
                env[m.group(1)] = m.group(2).strip('"')
    return env


def test_compose_and_dockerfile_make_a_safe_production_configuration(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    env = {**_dockerfile_env(), **_compose_env()}
    for k in list(__import__("os").environ):
        if k.startswith("APP_") or k == "DATABASE_URL":
            monkeypatch.delenv(k)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    s = Settings(_env_file=None)  # type: ignore[call-arg]
    assert s.environment == "production"
    assert not s.simulation and not s.force_simulation
    assert s.payment_provider == "btcpay" and s.btcpay_api_key == "apikey123"
    assert s.webhook_secret == "a-webhook-secret-from-btcpay-0123"
    assert s.proxy_networks == ()  # nothing trusted unless the operator names the proxy
    assert s.database_url.startswith("postgresql")


def test_dockerfile_and_makefile_leave_forwarding_headers_to_the_app() -> None:
    for name in ("Dockerfile", "Makefile", "compose.yaml"):
        text = (ROOT / name).read_text()
        assert "forwarded-allow-ips" not in text, name
        assert "--proxy-headers" not in text, name


def test_production_refuses_a_blank_or_demo_seller() -> None:
    """Receipts and credit notes print the seller: blank details or the demo company's are
    refused in production (the demo company stays allowed in a demo that takes no money)."""
    for blank in ({"seller_name": ""}, {"seller_tax_id": "  "},
                  {"seller_address_en": "", "seller_address_zh": ""}):  # fmt: skip
        with pytest.raises(ValidationError, match="none may be blank"):
            prod(**blank)
    demo = {"seller_name": "GPU Nodes Ltd.", "seller_tax_id": "BR 7612 3456"}
    with pytest.raises(ValidationError, match="still the demo company"):
        prod(**demo)
    assert prod(**demo, simulation=True, force_simulation=True).seller_tax_id
    # a real company that left the demo's Chinese name in place is refused too
    with pytest.raises(ValidationError, match="APP_SELLER_NAME_ZH"):
        prod(seller_name_zh="GPU 节点有限公司")
    assert prod(seller_address_en="", seller_address_zh="新加坡示例路 1 号").seller_address_zh
