"""A BTCPay Server provider over its Greenfield API (``/api/v1``), with httpx.

- **Create**: ``POST /api/v1/stores/{store}/invoices`` with the amount in USD, one payment
  method, a 15-minute expiry and a 24-hour monitoring window; then
  ``GET …/invoices/{id}/payment-methods`` for the address, the payment link, the locked
  rate and the amount due in the coin.
- **Read payments**: the same ``payment-methods`` call; each payment's ``value`` (coin
  decimal), ``receivedDate`` (unix seconds) and ``status`` (``Settled`` → confirmed,
  ``Processing`` → seen, ``Invalid`` → ignored).
- **Notifications**: BTCPay signs each webhook body with HMAC-SHA256 in ``BTCPay-Sig:
  sha256=<hex>`` — the shape ``service.handle_webhook`` already verifies; a notification only
  triggers a re-read through :meth:`payments`.

Authentication is ``Authorization: token <api key>`` (a store API key with
``btcpay.store.cancreateinvoice`` and ``btcpay.store.canviewinvoices``).
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

import httpx
from sqlmodel import Session

from app import errors
from app.errors import N_
from app.payments import rules
from app.payments.models import Invoice
from app.payments.rates import CURRENCIES

# Our currency code → BTCPay payment method id (stablecoins come from BTCPay's ERC-20 plugin).
PAYMENT_METHODS = {"BTC": "BTC", "ETH": "ETH", "USDT": "USDT", "USDC": "USDC"}


class ProviderUnavailable(errors.DomainError):
    status_code = 503
    code = "provider_unavailable"
    default_message = N_("The payment provider is not answering. Try again in a minute.")


def _units(value: Any, decimals: int) -> int:
    """A coin amount as BTCPay writes it ("0.00123") → integer smallest units."""
    try:
        amount = Decimal(str(value))
    except InvalidOperation:
        raise ProviderUnavailable() from None
    if not amount.is_finite() or amount < 0:
        raise ProviderUnavailable()
    return int(amount.scaleb(decimals).to_integral_value())


class BTCPayProvider:
    def __init__(
        self,
        *,
        url: str,
        store_id: str,
        api_key: str,
        transport: httpx.BaseTransport | None = None,
        timeout: float = 10.0,
    ) -> None:
        self.store_id = store_id
        self.client = httpx.Client(
            base_url=url.rstrip("/"),
            headers={"Authorization": f"token {api_key}", "Accept": "application/json"},
            timeout=timeout,
            transport=transport,
        )

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            r = self.client.request(method, path, **kwargs)
        except httpx.HTTPError:
            raise ProviderUnavailable() from None
        if r.status_code >= 400:
            raise ProviderUnavailable()
        try:
            return r.json()
        except ValueError:
            raise ProviderUnavailable() from None

    def _method(self, provider_id: str, currency: str) -> dict[str, Any]:
        methods = self._call(
            "GET", f"/api/v1/stores/{self.store_id}/invoices/{provider_id}/payment-methods"
        )
        wanted = PAYMENT_METHODS[currency]
        for m in methods if isinstance(methods, list) else []:
            if not isinstance(m, dict):
                continue
            name = m.get("paymentMethodId") or m.get("paymentMethod") or m.get("cryptoCode")
            if name == wanted:
                return m
        raise ProviderUnavailable()

    def create(self, session: Session, wanted: rules.InvoiceRequest) -> dict[str, Any]:
        currency, amount_cents = wanted.currency, wanted.amount_cents
        cur = CURRENCIES[currency]
        body = {
            "amount": f"{amount_cents // 100}.{amount_cents % 100:02d}",
            "currency": "USD",
            "metadata": {"orderId": wanted.reference},
            "checkout": {
                "paymentMethods": [PAYMENT_METHODS[currency]],
                "expirationMinutes": int(rules.RATE_LOCK.total_seconds() // 60),
                "monitoringMinutes": int(rules.MONITORING_WINDOW.total_seconds() // 60),
            },
        }
        created = self._call("POST", f"/api/v1/stores/{self.store_id}/invoices", json=body)
        provider_id = str(created.get("id") or "") if isinstance(created, dict) else ""
        if not provider_id or len(provider_id) > 32:
            raise ProviderUnavailable()
        m = self._method(provider_id, currency)
        return {
            "provider_id": provider_id,
            "address": str(m.get("destination") or "")[:100],
            "payment_uri": str(m.get("paymentLink") or "")[:300],
            "due_units": _units(m.get("amount"), cur.decimals),
            "rate": str(m.get("rate") or "0"),
            "rate_source": "btcpay",
        }

    def payments(self, session: Session, invoice: Invoice) -> list[rules.Payment]:
        m = self._method(invoice.provider_id, invoice.currency)
        out: list[rules.Payment] = []
        for p in m.get("payments") or []:
            if not isinstance(p, dict) or p.get("status") == "Invalid":
                continue
            try:
                seen = datetime.fromtimestamp(int(p.get("receivedDate") or 0), UTC)
            except (TypeError, ValueError, OverflowError):
                raise ProviderUnavailable() from None
            out.append(
                rules.Payment(
                    _units(p.get("value"), invoice.decimals), seen, p.get("status") == "Settled"
                )
            )
        return out
