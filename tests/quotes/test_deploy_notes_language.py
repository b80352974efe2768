"""The engineers' notes a quote prefills on /deploy read in the reader's language: the
sizing link's defaults are given in Chinese on a Chinese page, a note sales wrote stays as
written, and the English page keeps the English defaults."""

from __future__ import annotations

import re
from collections.abc import Callable
from urllib.parse import parse_qs, urlsplit

from fastapi.testclient import TestClient
from sqlmodel import Session

from app.quotes.models import Quote

SIZING = "/size?model=llama-3.1-8b&tokens=1T"
LATIN_RUN = re.compile(r"[A-Za-z]+[ ,]+[A-Za-z]+[ ,]+[A-Za-z]+")  # three Latin words


def _accept(client: TestClient, token: str) -> dict[str, list[str]]:
    r = client.post(f"/q/{token}/accept")
    assert r.status_code == 303
    target = urlsplit(r.headers["location"])
    assert target.path == "/deploy"
    return parse_qs(target.query)


def _token(session: Session, qid: int) -> str:
    session.expire_all()
    q = session.get(Quote, qid)
    assert q is not None
    session.commit()
    return q.token


def test_the_sizing_defaults_follow_the_reader(
    build_quote: Callable[..., int],
    sales_client: TestClient,
    new_client: Callable[[], TestClient],
    session: Session,
) -> None:
    qid = build_quote(sizing=SIZING, quantity="2")
    assert sales_client.post(f"/staff/quotes/{qid}/send").status_code == 303
    token = _token(session, qid)

    zh = new_client()
    zh.cookies.set("lang", "zh_CN")
    notes = _accept(zh, token)
    assert notes["note_model_size"] == ["8.0B 参数"]
    assert notes["note_token_budget"] == ["1T token"]
    comm = notes["note_comm_pattern"][0]
    assert "（" in comm and not LATIN_RUN.search(comm), comm  # the layout in Chinese
    # the /deploy page the link opens has no English note in its fields
    page = zh.get("/deploy", params={k: v[0] for k, v in notes.items()}).text
    assert "params" not in page and "across nodes" not in page

    en = new_client()
    notes = _accept(en, token)  # accepting again: the same landing page, in English
    assert notes["note_model_size"] == ["8.0B params"]
    assert notes["note_token_budget"] == ["1T tokens"]
    assert "optimizer state sharded over all GPUs" in notes["note_comm_pattern"][0]


def test_a_note_sales_wrote_stays_as_written(
    build_quote: Callable[..., int],
    sales_client: TestClient,
    new_client: Callable[[], TestClient],
    session: Session,
) -> None:
    qid = build_quote(sizing=SIZING, quantity="2", note_model_size="8B dense, our fork")
    assert sales_client.post(f"/staff/quotes/{qid}/send").status_code == 303
    zh = new_client()
    zh.cookies.set("lang", "zh_CN")
    notes = _accept(zh, _token(session, qid))
    assert notes["note_model_size"] == ["8B dense, our fork"]
    assert notes["note_token_budget"] == ["1T token"]
