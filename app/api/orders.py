"""The orders JSON API (bearer tokens): create (idempotent), list, read, cancel, keep
(take back a cancel at the period end while the paid month runs).

``POST /api/v1/orders`` needs an ``Idempotency-Key`` header: the same key with the same
body returns the same order (200 instead of 201); the same key with another body → 409.
``"pay": true`` pays the first month from the balance in the same call; when the balance
is short the order is still created and the answer is 402 with ``shortfall_cents`` —
retry the same request (same key) after a top-up and it pays. ``pay`` is what to do with
the order, not part of it: the order a key created (``"pay": false`` or short) is paid by
sending the same body with ``"pay": true``, once; a paid order is never charged again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from fastapi import APIRouter, Header
from fastapi.responses import JSONResponse
from sqlmodel import Session

from app import messages
from app.accounts.deps import CurrentUser
from app.api.jsonbody import StrictJSONRoute
from app.catalog import service as catalog
from app.errors import N_, DomainError, InsufficientBalance, InvalidInput
from app.orders import service
from app.orders.schemas import EventOut, OrderCreate, OrderOut
from app.quotes import service as quotes
from app.web.deps import NowDep, SessionDep, settle_session
from app.web.i18n import gettext as _
from app.web.params import RowId

if TYPE_CHECKING:  # a type only: reads go through the service
    from app.orders.models import Order

router = APIRouter(prefix="/api/v1/orders", tags=["orders"], route_class=StrictJSONRoute)


def _out(session: Session, order: Order, now: Any, *, detail: bool = False) -> OrderOut:
    assert order.id is not None
    out = _as_stored(session, order, now, detail=detail)
    if detail:  # one order read: its promise in the reader's language, as the console says
        # it (the row keeps the language it was placed in; the paid checkout's answer and the
        # list read no more than the row)
        frozen = catalog.frozen_promise(session, order.id)
        if frozen is not None and frozen.explanation:
            out.promise_explanation = frozen.explanation
    return out


def _as_stored(session: Session, order: Order, now: Any, *, detail: bool) -> OrderOut:
    assert order.id is not None
    return OrderOut.of(
        order,
        late=service.is_order_late(order, now),
        ssh_keys=service.ssh_keys_of(order),
        hosts=service.hosts_of(session, order.id) if detail else None,
        events=[
            # in the reader's language, as the console's timeline says it
            EventOut(at=e.at, kind=e.kind, message=messages.text_of(e))
            for e in service.timeline(session, order.id)
        ]
        if detail
        else None,
    )


@router.post("", status_code=201, response_model=OrderOut)
def create(
    body: OrderCreate,
    session: SessionDep,
    now: NowDep,
    user: CurrentUser,
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key")] = None,
) -> Any:
    if not idempotency_key or not idempotency_key.strip():
        raise InvalidInput(
            N_("Send an Idempotency-Key header (any unique string up to 80 characters)."),
            field="Idempotency-Key",
        )
    if body.nodes > service.MAX_NODES:
        raise service.AboveSelfServe(
            quotes.cluster_request_path(sku=body.sku, nodes=body.nodes, sizing=body.sizing)
        )
    draft = _draft_of(body)
    errors = service.check_draft(draft)
    if errors:
        raise InvalidInput(errors=errors, field=next(iter(errors)))
    made = service.create_order_for_checkout(
        session, user=user, draft=draft, idempotency_key=idempotency_key.strip(), now=now
    )
    order = made.order
    if made.created and draft.quote_token and order.quote_id is None:
        # a new order asked for a quoted price that cannot be given: refused (the request's
        # transaction rolls back, so no order stays), never charged at the list price. A
        # replay answers with the order its key made, as it stands (repriced after a
        # withdrawn quote's 409, it pays at the price that answer named)
        raise service.QuoteNotApplied()
    status = 201 if made.created else 200
    if body.pay:
        assert order.id is not None
        try:
            order = service.pay_order(
                session,
                user=user,
                order_id=order.id,
                idempotency_key=order.idempotency_key,
                now=now,
                # a new order: its row is ours until commit, its promise was just read
                order=order if made.created else None,
                seen_promise=made.promise,
            )
        except InsufficientBalance as e:
            short = int(getattr(e, "shortfall_cents", 0) or 0)
            return _payment_failed(
                session, order, now, e, status=402, extra={"shortfall_cents": short}
            )
        except (service.PriceChanged, service.NotPromisable) as e:
            return _payment_failed(session, order, now, e, status=409)
        # The SKU's stock row stays locked until COMMIT, and every other checkout of the SKU
        # waits on it: commit as soon as the payment is done, not after the answer is built
        # (the answer reads only the loaded order: expire_on_commit is off, so no query).
        # Still before a byte is sent; should building the answer fail now, the client gets
        # a 500 and a retry with the same Idempotency-Key answers with the paid order.
        settle_session(session, commit=True)
    return JSONResponse(_out(session, order, now).model_dump(mode="json"), status_code=status)


def _draft_of(body: OrderCreate) -> service.OrderDraft:
    """The validated API model as the service's draft (typed already: no text to re-parse)."""
    return service.OrderDraft(
        sku_id=body.sku,
        quantity=body.nodes,
        image_id=body.image,
        ssh_key_ids=list(body.ssh_key_ids),
        new_key_name=body.ssh_key.name if body.ssh_key else "",
        new_key_text=body.ssh_key.public_key if body.ssh_key else "",
        note_model_size=body.notes.model_size,
        note_token_budget=body.notes.token_budget,
        note_node_count=body.notes.node_count,
        note_private_network=body.notes.private_network,
        note_comm_pattern=body.notes.comm_pattern,
        note_free_text=body.notes.free_text,
        sizing_query=body.sizing,
        quote_token=body.quote,
    )


def _payment_failed(
    session: Session,
    order: Order,
    now: Any,
    e: Exception,
    *,
    status: int,
    extra: dict[str, Any] | None = None,
) -> JSONResponse:
    """The order stays (awaiting payment); the answer says why it was not paid."""

    assert isinstance(e, DomainError)
    err: dict[str, Any] = {"code": e.code, "message": e.render_message(_), **(extra or {})}
    body = {"error": err, "order": _out(session, order, now).model_dump(mode="json")}
    return JSONResponse(body, status_code=status)


@router.get("", response_model=list[OrderOut])
def list_orders(session: SessionDep, now: NowDep, user: CurrentUser) -> list[OrderOut]:
    return [_out(session, o, now) for o in service.visible_orders(session, user)]


@router.get("/{order_id}", response_model=OrderOut)
def get_order(order_id: RowId, session: SessionDep, now: NowDep, user: CurrentUser) -> OrderOut:
    return _out(session, service.get_order_for(session, user, order_id), now, detail=True)


@router.post("/{order_id}/cancel", response_model=OrderOut)
def cancel_order(order_id: RowId, session: SessionDep, now: NowDep, user: CurrentUser) -> OrderOut:
    order = service.cancel_order(session, user=user, order_id=order_id, now=now)
    return _out(session, order, now, detail=True)


@router.post("/{order_id}/keep", response_model=OrderOut)
def keep_renewing(order_id: RowId, session: SessionDep, now: NowDep, user: CurrentUser) -> OrderOut:
    order = service.keep_renewing(session, user=user, order_id=order_id, now=now)
    return _out(session, order, now, detail=True)
