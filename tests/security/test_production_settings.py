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

from app.clock import FixedClock
from app.main import create_app
from app.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
SECRET = "p" * 48
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
        "webhook_secret": "w" * 32,
        "simulation": False,
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
        "APP_SECRET_KEY": "s" * 64,
        "APP_WEBHOOK_SECRET": "a-webhook-secret-from-btcpay-0123",
        "APP_BTCPAY_URL": "https://btcpay.example.com",
        "APP_BTCPAY_STORE_ID": "Store123",
        "APP_BTCPAY_API_KEY": "apikey123",
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
