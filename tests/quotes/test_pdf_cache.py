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


def _text(body: bytes) -> str:
    import io

    from pypdf import PdfReader

    return "\n".join(p.extract_text() or "" for p in PdfReader(io.BytesIO(body)).pages)


class _Processes:
    """Each web process has its own PDF cache: ``use("a")`` makes the next requests run
    as process A (its cache), ``use("b")`` as process B; one database under both."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from app.quotes import pdf_cache

        self.caches = {"a": PdfCache(), "b": PdfCache()}
        self._monkeypatch = monkeypatch
        self._module = pdf_cache

    def use(self, name: str) -> PdfCache:
        self._monkeypatch.setattr(self._module, "CACHE", self.caches[name])
        return self.caches[name]


def test_a_quote_changed_in_another_process_is_never_served_from_this_ones_cache(
    build_quote: Callable[..., int],
    sales_client: TestClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The cache key is a digest of the whole quote row as read by this request (and the
    language and the sales contact): a change made anywhere is a new key everywhere,
    with no invalidation message between processes to get lost."""
    procs = _Processes(monkeypatch)
    qid = build_quote()  # 2 × HGX B200, 3 months, 10 % off: US$188,460
    a = procs.use("a")
    first = sales_client.get(f"/staff/quotes/{qid}/pdf")
    assert "US$188,460.00" in _text(first.content) and a.renders == 1
    procs.use("b")  # sales edit the draft's discount on another process
    from .conftest import BASE_FORM

    edit = sales_client.post(f"/staff/quotes/{qid}/edit", data={**BASE_FORM, "discount": "5"})
    assert edit.status_code == 303
    procs.use("a")
    again = sales_client.get(f"/staff/quotes/{qid}/pdf")
    text = _text(again.content)
    assert "US$198,930.00" in text and "US$188,460.00" not in text  # 2 × 3 × US$33,155
    assert a.renders == 2
    sales_client.get(f"/staff/quotes/{qid}/pdf")
    assert a.renders == 2  # the new version is cached in its turn


def test_a_shared_pdf_follows_a_row_written_behind_the_apps_back(
    build_quote: Callable[..., int],
    sales_client: TestClient,
    new_client: Callable[[], TestClient],
    engine: Engine,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Even a write that bypasses every route (a migration, a script, another version of
    the app) changes the key: the validity date printed on the PDF is the row's."""
    from datetime import datetime

    from app.quotes.models import Quote

    procs = _Processes(monkeypatch)
    qid = build_quote()
    assert sales_client.post(f"/staff/quotes/{qid}/send").status_code == 303
    with Session(engine) as s:
        token = s.get(Quote, qid).token  # type: ignore[union-attr]
    prospect = new_client()
    a = procs.use("a")
    before = _text(prospect.get(f"/q/{token}/pdf").content)
    with Session(engine) as s:
        q = s.get(Quote, qid)
        assert q is not None
        q.expires_at = datetime(2027, 3, 31, 12, 0)
        s.add(q)
        s.commit()
    after = _text(prospect.get(f"/q/{token}/pdf").content)
    # the reader's zone (none known here: UTC, labelled), in the document's date format
    assert "Mar 31, 2027, 12:00:00\u202fPM UTC" in after and "Mar 31, 2027" not in before
    assert a.renders == 2


def test_the_cache_keeps_the_most_recently_used_pdfs() -> None:
    cache = PdfCache(max_entries=2)
    for key in ("a", "b", "a", "c"):  # "b" is the least recently used when "c" arrives
        cache.get_or_render(key, lambda k=key: k.encode())  # type: ignore[misc]
    assert cache.renders == 3
    cache.get_or_render("a", lambda: b"again")
    assert cache.renders == 3  # still cached
    assert cache.get_or_render("b", lambda: b"b2") == b"b2" and cache.renders == 4
