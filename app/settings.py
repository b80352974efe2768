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


# Checks production makes that ``APP_ENVIRONMENT=test`` skips, each with the reason tests
# need it skipped; every other production check runs under ``test`` too.
TEST_BYPASSES = {
    "placeholder_secret_key": "a test app may be built from a bare environment",
    "simulation": "tests drive the payment simulator and the simulated clock",
    "payment_provider": "tests without the simulated clock still pay through the simulator",
    "public_webhook_secret": "test servers sign their own webhooks with the public default",
    "base_url": "test apps answer on http://testserver and 127.0.0.1",
    "demo_seller": "test apps issue documents as the demo company",
}
# The demo seller (the defaults): any of it left is refused in production unless it is a
# demo, so a real company's receipts never print the demo's Chinese name or address.
DEMO_SELLER = {
    "seller_name": "GPU Nodes Ltd.",
    "seller_name_zh": "GPU 节点有限公司",
    "seller_address_en": "Unit 1203, 12/F, Harbour Centre\n25 Harbour Road, Wan Chai\nHong Kong",
    "seller_address_zh": "香港湾仔港湾道 25 号\n海港中心 12 楼 1203 室",
    "seller_tax_id": "BR 7612 3456",
}
MIN_DISTINCT_SECRET_KEY = 10
MIN_DISTINCT_WEBHOOK_SECRET = 8


def low_entropy(secret: str, min_distinct: int) -> bool:
    """Blank, or made of fewer than ``min_distinct`` different characters ("aaaa…")."""
    return not secret.strip() or len(set(secret)) < min_distinct


def _loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _base_url_problem(base_url: str) -> str | None:
    """Why ``APP_BASE_URL`` cannot be the public address in links and emails, if it can't."""
    url = urlsplit(base_url.strip())
    if not base_url.strip() or url.scheme not in ("http", "https") or not url.hostname:
        return (
            "APP_BASE_URL is missing or not a URL; set the site's public address "
            "(e.g. https://gpunodes.example.com): reset links and emails are built from it."
        )
    if url.scheme != "https" or _loopback(url.hostname):
        return (
            f"APP_BASE_URL is {base_url!r}; production needs the site's public https address "
            "(reset links and emails are built from it)."
        )
    return None


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

    # The seller printed on every receipt (invoice) and credit note, beside the buyer's
    # billing details: legal name, postal address in English and in Chinese (one line per
    # address line, "\n" between them in the environment), tax id. Demo defaults.
    seller_name: str = DEMO_SELLER["seller_name"]
    seller_name_zh: str = DEMO_SELLER["seller_name_zh"]
    seller_address_en: str = DEMO_SELLER["seller_address_en"]
    seller_address_zh: str = DEMO_SELLER["seller_address_zh"]
    seller_tax_id: str = DEMO_SELLER["seller_tax_id"]

    # Staff (sales, ops) need a second factor for any staff power: always in production;
    # elsewhere only when this is set (the authorization matrix and the probes set it).
    staff_second_factor: bool = False

    # --- observability (issue 13) ---
    # Bearer token that GET /metrics requires; empty: /metrics answers 404 (not public).
    metrics_token: str = ""

    @model_validator(mode="after")
    def _refuse_weak_settings(self) -> Settings:
        """Production refuses every weak setting below; ``test`` refuses them too except the
        checks named in ``TEST_BYPASSES``; development refuses only what cannot work."""
        if self.environment != "development":
            bypass = TEST_BYPASSES if self.environment == "test" else {}
            for check, message in self._weaknesses():
                if check not in bypass:
                    raise ValueError(message)
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

    def _weaknesses(self) -> list[tuple[str, str]]:
        """(check name, message) for every weak setting, in the order they are reported."""
        found: list[tuple[str, str]] = []
        if self.secret_key == PLACEHOLDER_SECRET:
            found.append(
                (
                    "placeholder_secret_key",
                    "APP_SECRET_KEY is still the development placeholder; set a real secret "
                    "(e.g. `python -c 'import secrets; print(secrets.token_urlsafe(48))'`).",
                )
            )
        elif len(self.secret_key) < 32:
            found.append(
                (
                    "secret_key_length",
                    "APP_SECRET_KEY must be at least 32 characters in production.",
                )
            )
        elif low_entropy(self.secret_key, MIN_DISTINCT_SECRET_KEY):
            found.append(
                (
                    "secret_key_entropy",
                    f"APP_SECRET_KEY has fewer than {MIN_DISTINCT_SECRET_KEY} different "
                    "characters (or is blank): anyone could guess it. Generate one with "
                    "`python -c 'import secrets; print(secrets.token_urlsafe(48))'`.",
                )
            )
        if self.simulation and not self.force_simulation:
            found.append(
                (
                    "simulation",
                    "APP_SIMULATION is on in production: anyone could credit a balance through "
                    "the payment simulator. Set APP_SIMULATION=false and configure the BTCPay "
                    "provider (APP_PAYMENT_PROVIDER=btcpay), or set APP_FORCE_SIMULATION=true "
                    "for a demo that takes no real money.",
                )
            )
        if not (
            self.seller_name.strip()
            and self.seller_tax_id.strip()
            and (self.seller_address_en.strip() or self.seller_address_zh.strip())
        ):
            found.append(
                (
                    "seller_details",
                    "APP_SELLER_NAME, APP_SELLER_TAX_ID and an address (APP_SELLER_ADDRESS_EN "
                    "or APP_SELLER_ADDRESS_ZH) are printed on every receipt and credit note; "
                    "none may be blank.",
                )
            )
        elif not self.force_simulation and (
            demo := [k for k, v in DEMO_SELLER.items() if getattr(self, k) == v]
        ):
            found.append(
                (
                    "demo_seller",
                    "The seller on receipts is still the demo company ("
                    + ", ".join(f"APP_{k.upper()}" for k in demo)
                    + "); set your legal name, addresses and tax id (a Chinese name or "
                    "address may be empty), or set APP_FORCE_SIMULATION=true for a demo "
                    "that takes no real money.",
                )
            )
        if self.webhook_secret in KNOWN_WEBHOOK_SECRETS:
            found.append(
                (
                    "public_webhook_secret",
                    "APP_WEBHOOK_SECRET is a public default; set the secret of your BTCPay "
                    "store's webhook.",
                )
            )
        elif len(self.webhook_secret) < 16 or low_entropy(
            self.webhook_secret, MIN_DISTINCT_WEBHOOK_SECRET
        ):
            found.append(
                (
                    "webhook_secret_strength",
                    "APP_WEBHOOK_SECRET is shorter than 16 characters or has fewer than "
                    f"{MIN_DISTINCT_WEBHOOK_SECRET} different characters; set the secret of "
                    "your BTCPay store's webhook.",
                )
            )
        if not self.simulation and self.payment_provider != "btcpay":
            found.append(
                (
                    "payment_provider",
                    "Production without simulation needs a real payment provider: set "
                    "APP_PAYMENT_PROVIDER=btcpay with APP_BTCPAY_URL, APP_BTCPAY_STORE_ID and "
                    "APP_BTCPAY_API_KEY.",
                )
            )
        if self.payment_provider == "btcpay" and self.btcpay_url:
            url = urlsplit(self.btcpay_url)
            if url.scheme not in ("http", "https") or not url.hostname:
                found.append(("provider_url", "APP_BTCPAY_URL is not an http(s) URL."))
            elif url.scheme != "https" and not _loopback(url.hostname):
                found.append(
                    (
                        "provider_url",
                        "APP_BTCPAY_URL must use https off this machine: the API key would "
                        "travel in clear.",
                    )
                )
        try:
            everything = [n for n in self.proxy_networks if n.prefixlen == 0]
        except ValueError:
            everything = []  # reported by the validator itself
        if everything:
            found.append(
                (
                    "trusted_proxies_everything",
                    f"APP_TRUSTED_PROXIES contains {everything[0]}: every client could then "
                    "choose its own address with X-Forwarded-For. Name your proxies' addresses.",
                )
            )
        problem = _base_url_problem(self.base_url)
        if problem:
            found.append(("base_url", problem))
        return found

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
    def https(self) -> bool:
        return self.base_url.startswith("https://")

    @property
    def secure_cookies(self) -> bool:
        return self.environment != "development" and self.environment != "test"
