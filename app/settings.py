"""Settings from the environment (prefix ``APP_``; ``DATABASE_URL`` honoured too)."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import AliasChoices, Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

ROOT = Path(__file__).resolve().parent.parent
PLACEHOLDER_SECRET = "change-me-development-only"  # noqa: S105 - refused outside development
DEFAULT_WEBHOOK_SECRET = "dev-webhook-secret"  # noqa: S105 - public; refused in production
# Webhook secrets that appear in this repository (defaults, examples): refused in production.
KNOWN_WEBHOOK_SECRETS = frozenset({DEFAULT_WEBHOOK_SECRET, "change-this-webhook-secret", ""})


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="APP_", env_file=".env", extra="ignore")

    environment: Literal["development", "test", "production"] = "development"
    database_url: str = Field(
        default=f"sqlite:///{ROOT / 'var' / 'app.db'}",
        validation_alias=AliasChoices("APP_DATABASE_URL", "DATABASE_URL"),
    )
    secret_key: str = PLACEHOLDER_SECRET
    base_url: str = "http://127.0.0.1:8000"
    # Simulation mode: staff may move the clock; the crypto provider is simulated.
    simulation: bool = True
    # Production refuses to start with simulation on unless this is also set (a staging
    # demo); every page then says so.
    force_simulation: bool = False
    webhook_secret: str = DEFAULT_WEBHOOK_SECRET
    # The payment provider: "simulated" (development) or "btcpay" (BTCPay Server Greenfield).
    payment_provider: Literal["simulated", "btcpay"] = "simulated"
    btcpay_url: str = ""  # e.g. https://btcpay.example.com
    btcpay_store_id: str = ""
    btcpay_api_key: str = ""
    # Reverse proxies whose X-Forwarded-For / X-Forwarded-Proto are believed: addresses or
    # CIDR networks, comma-separated ("10.0.0.0/8,127.0.0.1"). Empty: no header is trusted.
    trusted_proxies: str = ""
    # Host names this site answers to in production (comma-separated); empty: base_url's host.
    allowed_hosts: str = ""
    smtp_host: str = "127.0.0.1"
    smtp_port: int = 8025
    mail_from: str = "GPU Nodes <noreply@gpunodes.test>"
    default_locale: str = "en"
    log_level: str = "INFO"
    sqlite_busy_timeout_ms: int = 15000
    db_pool_size: int = 10
    # The live /size fragment checks the catalog's price version at most this often per
    # process (a list-price change made elsewhere shows within this long; the deploy page,
    # review and checkout always read the current price). 0: on every request.
    fragment_price_max_age_ms: int = Field(default=200, ge=0, le=60_000)

    # Staff (sales, ops) need a second factor for any staff power: always in production;
    # elsewhere only when this is set (the authorization matrix and the probes set it).
    staff_second_factor: bool = False

    # --- observability (issue 13) ---
    # Bearer token that GET /metrics requires; empty: /metrics answers 404 (not public).
    metrics_token: str = ""

    @model_validator(mode="after")
    def _refuse_placeholder_secret(self) -> Settings:
        if self.environment == "production" and self.secret_key == PLACEHOLDER_SECRET:
            raise ValueError(
                "APP_SECRET_KEY is still the development placeholder; set a real secret "
                "(e.g. `python -c 'import secrets; print(secrets.token_urlsafe(48))'`)."
            )
        if self.environment == "production" and len(self.secret_key) < 32:
            raise ValueError("APP_SECRET_KEY must be at least 32 characters in production.")
        if self.environment == "production":
            if self.simulation and not self.force_simulation:
                raise ValueError(
                    "APP_SIMULATION is on in production: anyone could credit a balance through "
                    "the payment simulator. Set APP_SIMULATION=false and configure the BTCPay "
                    "provider (APP_PAYMENT_PROVIDER=btcpay), or set APP_FORCE_SIMULATION=true "
                    "for a demo that takes no real money."
                )
            if self.webhook_secret in KNOWN_WEBHOOK_SECRETS or len(self.webhook_secret) < 16:
                raise ValueError(
                    "APP_WEBHOOK_SECRET is a public default (or shorter than 16 characters); "
                    "set the secret of your BTCPay store's webhook."
                )
            if not self.simulation and self.payment_provider != "btcpay":
                raise ValueError(
                    "Production without simulation needs a real payment provider: set "
                    "APP_PAYMENT_PROVIDER=btcpay with APP_BTCPAY_URL, APP_BTCPAY_STORE_ID and "
                    "APP_BTCPAY_API_KEY."
                )
        if self.payment_provider == "btcpay":
            missing = [
                name
                for name, value in (
                    ("APP_BTCPAY_URL", self.btcpay_url),
                    ("APP_BTCPAY_STORE_ID", self.btcpay_store_id),
                    ("APP_BTCPAY_API_KEY", self.btcpay_api_key),
                )
                if not value
            ]
            if missing:
                raise ValueError("The BTCPay provider needs " + ", ".join(missing) + ".")
        self.proxy_networks  # noqa: B018 - raises on a malformed APP_TRUSTED_PROXIES
        return self

    @property
    def proxy_networks(self) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
        nets = []
        for part in self.trusted_proxies.replace(" ", "").split(","):
            if part:
                try:
                    nets.append(ipaddress.ip_network(part, strict=False))
                except ValueError:
                    raise ValueError(
                        f"APP_TRUSTED_PROXIES: {part!r} is not an address or network."
                    ) from None
        return tuple(nets)

    @property
    def host_names(self) -> frozenset[str]:
        """Host names accepted in production (lower case, without port)."""
        names = [h.strip().lower() for h in self.allowed_hosts.split(",") if h.strip()]
        if not names:
            names = [(urlsplit(self.base_url).hostname or "").lower()]
        return frozenset(n for n in names if n)

    @property
    def staff_second_factor_required(self) -> bool:
        return self.environment == "production" or self.staff_second_factor

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")

    @property
    def https(self) -> bool:
        return self.base_url.startswith("https://")

    @property
    def secure_cookies(self) -> bool:
        return self.environment != "development" and self.environment != "test"
