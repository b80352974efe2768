"""Finding 9: the public quote PDF is rendered once per quote version."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from fastapi.testclient import TestClient
from sqlalchemy.engine import Engine
from sqlmodel import Session

from app.quotes.pdf_cache import PdfCache


def test_shared_pdf_is_rendered_once_per_quote_version(
    build_quote: Callable[..., int],
    sales_client: TestClient,
    new_client: Callable[[], TestClient],
    engine: Engine,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from app.quotes import pdf_cache
    from app.quotes.models import Quote

    cache = PdfCache()
    monkeypatch.setattr(pdf_cache, "CACHE", cache)
    qid = build_quote()
    assert sales_client.post(f"/staff/quotes/{qid}/send").status_code in (200, 303)
    with Session(engine) as s:
        token = s.get(Quote, qid).token  # type: ignore[union-attr]
    anon = new_client()
    bodies = [anon.get(f"/q/{token}/pdf") for _ in range(5)]
    assert all(b.status_code == 200 and b.content.startswith(b"%PDF") for b in bodies)
    assert cache.renders == 1
