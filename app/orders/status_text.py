"""What an order's page and the console list say about it, derived from its CURRENT state.

Pure (no database, no web): the order's fields, the frozen delivery promise and ``now`` go
in; out come only the lines that still apply. Stored text (the promise's explanation, ops'
delay note) is never shown just because it was once written:

* the stock / batch line ("3 in stock, ready in 2 business days", "Next batch arrives
  Dec 13, ready Dec 16") only while the order waits for delivery, is not late, and the
  batch's arrival day has not passed;
* ops' delay note only while the order waits for delivery;
* "Renews on" only for a running lease whose renewal is not unpaid (an unpaid renewal
  says so instead; a suspended lease renews nothing);
* the private network's status only while the lease runs ("ended with the lease" after).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime

from app.orders.lifecycle import OrderStatus, is_late


def N_(s: str) -> str:
    return s


WAITING = frozenset({OrderStatus.paid.value, OrderStatus.provisioning.value})
RUNNING = frozenset({OrderStatus.delivered.value, OrderStatus.ending.value})
LEASE_OVER = frozenset(
    {
        OrderStatus.ended.value,
        OrderStatus.wiping.value,
        OrderStatus.wiped.value,
        OrderStatus.cancelled.value,
        OrderStatus.abandoned.value,
    }
)

# The private network's states as the customer reads them (ops' states + "ended").
NETWORK_LABELS = {
    "requested": N_("Requested"),
    "configuring": N_("Being configured"),
    "ready": N_("Ready"),
    "ended": N_("Taken down with the lease"),
}


@dataclass(frozen=True)
class OrderStatusText:
    """The status lines that apply now; an empty string/None means "show nothing"."""

    promise_line: str = ""
    delay_reason: str = ""
    delay_estimate: date | None = None
    # "renews" | "ends" | "unpaid" | "suspended" | "" (nothing about renewal)
    renewal: str = ""
    # "" | requested | configuring | ready | ended
    network: str = ""

    @property
    def network_label(self) -> str:
        return NETWORK_LABELS.get(self.network, self.network)


def promise_still_applies(
    status: str,
    promised: date | None,
    now: datetime,
    arrival: date | None,
) -> bool:
    """The promise's stock/batch explanation is worth showing: the order waits for delivery,
    is not late, and the batch it waits for is not due in the past."""
    if status not in WAITING or is_late(status, promised, now):
        return False
    return arrival is None or arrival >= now.date()


def renewal_state(
    status: str,
    period_end: datetime | None,
    grace_until: datetime | None,
    cancel_at_period_end: bool,
) -> str:
    if period_end is None:
        return ""
    if status == OrderStatus.suspended.value:
        return "suspended"
    if status not in RUNNING:
        return ""
    if grace_until is not None:
        return "unpaid"
    return "ends" if cancel_at_period_end or status == OrderStatus.ending.value else "renews"


def network_state(status: str, network: str) -> str:
    """ops' status of the private network while the lease runs; "ended" once it is over."""
    if not network:
        return ""
    if status in LEASE_OVER:
        # Never delivered: there was no network to take down, so say nothing.
        if status in (OrderStatus.cancelled.value, OrderStatus.abandoned.value):
            return ""
        return "ended"
    return network


def describe(
    *,
    status: str,
    now: datetime,
    promised: date | None = None,
    promise_text: str = "",
    arrival: date | None = None,
    delay_reason: str = "",
    delay_estimate: date | None = None,
    period_end: datetime | None = None,
    grace_until: datetime | None = None,
    cancel_at_period_end: bool = False,
    network: str = "",
) -> OrderStatusText:
    waiting = status in WAITING
    return OrderStatusText(
        promise_line=promise_text
        if promise_text and promise_still_applies(status, promised, now, arrival)
        else "",
        delay_reason=delay_reason if waiting else "",
        delay_estimate=delay_estimate if waiting and delay_reason else None,
        renewal=renewal_state(status, period_end, grace_until, cancel_at_period_end),
        network=network_state(status, network),
    )


def arrival_of(params: tuple[tuple[str, object], ...] | dict[str, object] | None) -> date | None:
    """The batch arrival day a frozen promise was made with (its "arrival" parameter)."""
    raw = dict(params or {}).get("arrival")
    if isinstance(raw, date):
        return raw
    if isinstance(raw, str):
        try:
            return date.fromisoformat(raw)
        except ValueError:
            return None
    return None


def for_order(
    order: object,
    now: datetime,
    *,
    promise_text: str = "",
    promise_params: tuple[tuple[str, object], ...] | dict[str, object] | None = None,
    network: str = "",
) -> OrderStatusText:
    """``describe`` for an ``Order`` row (read by attribute, so this module needs no models)."""
    return describe(
        status=str(getattr(order, "status", "")),
        now=now,
        promised=getattr(order, "promised_date", None),
        promise_text=promise_text,
        arrival=arrival_of(promise_params),
        delay_reason=str(getattr(order, "delay_reason", "") or ""),
        delay_estimate=getattr(order, "delay_estimate", None),
        period_end=getattr(order, "period_end", None),
        grace_until=getattr(order, "grace_until", None),
        cancel_at_period_end=bool(getattr(order, "cancel_at_period_end", False)),
        network=network,
    )
