"""Public share pages: the prospect opens ``/q/{token}``, reads the quote, accepts it.

No login: the unguessable token is the credential, and it shows exactly one quote.
Node quotes accept into ``/deploy`` prefilled with ``quote=<token>`` (checkout honours the
quoted price until the quote expires). GB300 NVL72 terms accept into a confirmation:
sales contact the prospect to sign the term contract.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from app.accounts.audit import client_ip
from app.accounts.deps import OptionalUser
from app.clock import utc
from app.quotes import pricing, service
from app.quotes.pricing import QuoteKind
from app.quotes.staff_routes import _quote_ctx, pdf_response
from app.web.deps import NowDep, SessionDep
from app.web.templating import render

router = APIRouter(include_in_schema=False)

# The link is the credential: never cache the page.
PRIVATE_HEADERS = {"Cache-Control": "no-store"}


@router.get("/q/{token}", response_class=HTMLResponse)
def shared_quote(
    request: Request, token: str, session: SessionDep, now: NowDep, user: OptionalUser
) -> Response:
    by_staff = user is not None and user.is_staff
    q = service.view_shared(session, token, now, ip=client_ip(request), by_staff=by_staff)
    ctx = _quote_ctx(session, q)
    exp = q.expires_at
    ctx.update(
        {
            "token": token,
            "staff_view": False,
            "can_accept": q.status in pricing.OPEN_STATUSES,
            "deploy_url": service.deploy_url(q) if q.kind == QuoteKind.node else None,
            "honoured": exp is not None and pricing.honoured(q.status, utc(exp), now),
        }
    )
    return render(request, "quotes/public.html", ctx, headers=PRIVATE_HEADERS)


@router.post("/q/{token}/accept")
def accept_quote(request: Request, token: str, session: SessionDep, now: NowDep) -> Response:
    q = service.accept_shared(session, token, now, ip=client_ip(request))
    if q.kind == QuoteKind.node:
        target = service.deploy_url(q)
    else:
        target = f"/q/{token}"
    if request.headers.get("hx-request"):
        return Response(status_code=204, headers={"HX-Redirect": target, **PRIVATE_HEADERS})
    return RedirectResponse(target, status_code=303, headers=PRIVATE_HEADERS)


@router.get("/q/{token}/pdf")
def shared_pdf(request: Request, token: str, session: SessionDep, now: NowDep) -> Response:
    q = service.shared_quote(session, token, now)
    resp = pdf_response(session, q, now)
    return resp
