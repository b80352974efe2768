"""Settings from the environment (prefix ``APP_``; ``DATABASE_URL`` honoured too)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import AliasChoices, Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

ROOT = Path(__file__).resolve().parent.parent
PLACEHOLDER_SECRET = "change-me-development-only"  # noqa: S105 - refused outside development


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
    webhook_secret: str = "dev-webhook-secret"  # noqa: S105
    smtp_host: str = "127.0.0.1"
    smtp_port: int = 8025
    mail_from: str = "GPU Nodes <noreply@gpunodes.test>"
    default_locale: str = "en"
    log_level: str = "INFO"
    sqlite_busy_timeout_ms: int = 15000
    db_pool_size: int = 10

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
        return self

    @property
    def is_sqlite(self) -> bool:
        return self.database_url.startswith("sqlite")

    @property
    def https(self) -> bool:
        return self.base_url.startswith("https://")

    @property
    def secure_cookies(self) -> bool:
        return self.environment != "development" and self.environment != "test"
