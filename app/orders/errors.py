"""The orders domain's refusals (each a status code and a message; app/errors.py renders
them as a page, an htmx fragment or JSON)."""

from __future__ import annotations

from datetime import date

from app import messages
from app.errors import N_, Conflict, InvalidInput, NotFound


class OrderNotFound(NotFound):
    code = "order_not_found"
    default_message = N_("We could not find that order.")


ABOVE_SELF_SERVE = N_("More than 16 nodes is a cluster we plan with you: talk to sales.")


class AboveSelfServe(InvalidInput):
    """More nodes than one self-serve order takes: the answer is the sales path."""

    code = "above_self_serve"
    default_message = ABOVE_SELF_SERVE

    def __init__(self, cluster_request_url: str) -> None:
        super().__init__(field="nodes")
        self.extra = {"cluster_request_url": cluster_request_url}


class IdempotencyConflict(Conflict):
    code = "idempotency_conflict"
    default_message = N_(
        "This idempotency key was already used for a different order (#{order_id})."
    )


class PromiseChanged(Conflict):
    code = "promise_changed"
    default_message = N_("The delivery date changed to {date}; check it and pay again.")

    def __init__(self, new_date: date, explanation: str = "") -> None:
        super().__init__(date=messages.format_day(new_date))
        self.new_date = new_date
        self.explanation = explanation


class PriceChanged(Conflict):
    code = "price_changed"
    default_message = N_(
        "The quoted price expired, so the list price applies now; check it and pay again."
    )


class QuoteWithdrawn(PriceChanged):
    code = "quote_withdrawn"
    default_message = N_(
        "Sales withdrew the quote, so the list price applies now; check it and pay again."
    )


class NotPayable(Conflict):
    code = "not_payable"
    default_message = N_("This order cannot be paid in its current state.")


class NotPromisable(Conflict):
    code = "not_promisable"
    default_message = N_(
        "We cannot promise a delivery date for this configuration right now. "
        "Choose fewer nodes or talk to our sales team."
    )


class NotCancellable(Conflict):
    code = "not_cancellable"
    default_message = N_("This order cannot be cancelled in its current state.")


class NotRenewable(Conflict):
    """A cancel at the period end taken back too late (the month over, or an ops end)."""

    code = "not_renewable"
    default_message = N_(
        "Only a lease you cancelled at the end of its month can be kept, and only until that "
        "month is over."
    )


class OrderChangedMeanwhile(Conflict):
    """The customer confirmed one kind of cancel, but the order moved on meanwhile (e.g. ops
    delivered it a moment earlier): nothing is done, the customer looks again."""

    code = "order_changed"
    default_message = N_(
        "This order changed while you were deciding (it may have just been delivered). "
        "Nothing was cancelled: please look at it again."
    )


class QuoteNotApplied(Conflict):
    """An API order sent with a quote the checkout cannot honour: refused, nothing created,
    rather than priced at the list price the client did not ask for."""

    code = "quote_not_applied"
    default_message = N_(
        "The quote does not apply to this order: it expired, was withdrawn, was used for "
        "another order or covers another configuration. Nothing was created; send the order "
        "without the quote to pay the list price."
    )
