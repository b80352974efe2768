"""The order's life as a pure state machine (standard library only).

    awaiting_payment → paid → provisioning → delivered → ending → ended → wiping → wiped
                        │         │             │
                        └─────────┴→ cancelled (refunded: the first-month hold is voided)
                                                └→ suspended (renewal unpaid after grace) → ended

"late" is not a state: it is derived — now is past the promised date and the order is not
delivered yet. A late order may be cancelled by the customer for a full refund, or still be
delivered by ops.
"""

from __future__ import annotations

from datetime import date, datetime
from enum import StrEnum


class OrderStatus(StrEnum):
    awaiting_payment = "awaiting_payment"
    paid = "paid"  # paid, awaiting provisioning
    provisioning = "provisioning"
    delivered = "delivered"  # lease active
    ending = "ending"  # cancelled by the customer; ends at period end
    suspended = "suspended"  # renewal unpaid after the grace period
    ended = "ended"
    wiping = "wiping"
    wiped = "wiped"
    cancelled = "cancelled"  # before delivery; the first month was refunded to the balance
    abandoned = "abandoned"  # never paid


TRANSITIONS: dict[OrderStatus, frozenset[OrderStatus]] = {
    OrderStatus.awaiting_payment: frozenset({OrderStatus.paid, OrderStatus.abandoned}),
    OrderStatus.paid: frozenset(
        {OrderStatus.provisioning, OrderStatus.delivered, OrderStatus.cancelled}
    ),
    OrderStatus.provisioning: frozenset({OrderStatus.delivered, OrderStatus.cancelled}),
    OrderStatus.delivered: frozenset(
        {OrderStatus.ending, OrderStatus.suspended, OrderStatus.ended}
    ),
    OrderStatus.ending: frozenset({OrderStatus.ended, OrderStatus.delivered}),
    OrderStatus.suspended: frozenset({OrderStatus.ended, OrderStatus.delivered}),
    OrderStatus.ended: frozenset({OrderStatus.wiping}),
    OrderStatus.wiping: frozenset({OrderStatus.wiped}),
    OrderStatus.wiped: frozenset(),
    OrderStatus.cancelled: frozenset(),
    OrderStatus.abandoned: frozenset(),
}

PRE_DELIVERY = frozenset({OrderStatus.paid, OrderStatus.provisioning})
LEASE_ACTIVE = frozenset({OrderStatus.delivered, OrderStatus.ending})
GRACE_DAYS = 3


class TransitionError(ValueError):
    def __init__(self, current: str, target: str) -> None:
        super().__init__(f"an order cannot go from {current} to {target}")
        self.current = current
        self.target = target


def can_transition(current: str, target: str) -> bool:
    return OrderStatus(target) in TRANSITIONS[OrderStatus(current)]


def check_transition(current: str, target: str) -> OrderStatus:
    if not can_transition(current, target):
        raise TransitionError(current, target)
    return OrderStatus(target)


def promised_instant_passed(promised: date, now: datetime) -> bool:
    """The promise is for a calendar date (UTC): it is missed once that whole day has passed."""
    return now.date() > promised


def is_late(status: str, promised: date | None, now: datetime) -> bool:
    return (
        promised is not None
        and OrderStatus(status) in PRE_DELIVERY
        and promised_instant_passed(promised, now)
    )
