"""Each table is written only by its own domain (docs/architecture.md "Who owns which table").

The owner of a table is the domain whose ``models.py`` declares it. Two checks:

- in the code: no module holds SQL text that writes another domain's table, and the paid
  checkout's composer (``app/orders/checkout.py``) builds no statement of its own — it only
  composes the builders each domain exports over its own tables;
- while money moves (a paid checkout over the JSON API, a cancel with its refund, on SQLite
  and PostgreSQL): every INSERT, UPDATE or DELETE sent to the database is attributed to the
  innermost module of ``app/`` that executed it, which must belong to the table's owner.
  ORM flushes are left to the import contracts (a domain's models are imported only by
  that domain), and the composer's one statement to the first check.
"""

from __future__ import annotations

import ast
import inspect
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event

from app.tables import MODEL_MODULES
from tests.orders.conftest import new_public_key

ROOT = Path(__file__).resolve().parents[2]
APP = ROOT / "app"
COMPOSERS = {"app/orders/checkout.py"}
WRITE = re.compile(r"\b(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+\"?([a-z_][a-z0-9_]*)", re.I)


def owner_of_module(name: str) -> str:
    """``app.orders.models`` → ``orders``; a top-level module (``app.clock``) owns its own."""
    parts = name.split(".")
    return parts[1] if len(parts) > 2 else name


def table_owners() -> dict[str, str]:
    owners: dict[str, str] = {}
    for module in MODEL_MODULES:
        for value in vars(module).values():
            table = getattr(value, "__table__", None)
            if table is not None and getattr(value, "__module__", "") == module.__name__:
                owners[table.name] = owner_of_module(module.__name__)
    return owners


def module_of(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def test_every_table_has_an_owner() -> None:
    owners = table_owners()
    assert {"orders", "order_events", "ledger_holds", "notifications"} <= set(owners)
    assert owners["ledger_holds"] == "ledger" and owners["order_events"] == "orders"
    assert owners["notifications"] == "notifications"
    # an order's invoice lines and credit notes are the ledger's copies, not orders' rows
    for table in ("receipt_lines", "credit_notes", "credit_note_lines", "credit_note_counters"):
        assert owners[table] == "ledger", table


def test_no_module_holds_sql_that_writes_another_domains_table() -> None:
    owners = table_owners()
    bad = []
    for path in sorted(APP.rglob("*.py")):
        mine = owner_of_module(module_of(path))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                for table in WRITE.findall(node.value):
                    if table in owners and owners[table] != mine:
                        bad.append(f"{path.relative_to(ROOT)}:{node.lineno} writes {table}")
    assert bad == []


def test_the_checkout_composer_builds_no_statement_itself() -> None:
    """It calls the domains' builders; it never names a table, SQL text or a DML
    constructor (the SAVEPOINT around the payment is a transaction command)."""
    forbidden = {"insert", "update", "delete", "text", "Table", "sa_insert", "sa_update"}
    for rel in COMPOSERS:
        tree = ast.parse((ROOT / rel).read_text(encoding="utf-8"))
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        names |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
        imported = {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                    for a in n.names if (n.module or "").startswith("sqlalchemy")}  # fmt: skip
        assert not (forbidden & (names | imported)), rel
        assert "__table__" not in names, rel


def _writer() -> str | None:
    """The innermost app module executing the statement; None inside an ORM flush."""
    frame = inspect.currentframe()
    found = None
    while frame is not None:
        file = frame.f_code.co_filename.replace("\\", "/")
        if "/sqlalchemy/orm/unitofwork.py" in file or "/sqlalchemy/orm/persistence.py" in file:
            return None
        if found is None and file.startswith(str(APP)) and not file.endswith("/app/db.py"):
            found = file
        frame = frame.f_back
    return found


@pytest.fixture
def writes(engine: Any) -> Iterator[list[tuple[str, str, str]]]:
    """(module path, its domain, table) for every statement that writes a table."""
    seen: list[tuple[str, str, str]] = []

    def listen(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        tables = WRITE.findall(statement)
        if not tables:
            return
        file = _writer()
        if file is None:
            return
        rel = str(Path(file).relative_to(ROOT))
        for t in tables:
            seen.append((rel, owner_of_module(module_of(Path(file))), t))

    event.listen(engine, "before_cursor_execute", listen)
    yield seen
    event.remove(engine, "before_cursor_execute", listen)


def test_money_moves_write_only_their_own_tables(
    client, engine, make_user, login, stock, fund, writes
) -> None:
    stock("hgx-b200", 2)
    u = make_user()
    fund(u, 10_000_000)
    login(client, u)
    token = client.post("/api/v1/tokens", data={"name": "t"})
    headers = {"Idempotency-Key": "own-1"}
    if token.status_code in (200, 201) and "token" in token.json():
        headers["Authorization"] = f"Bearer {token.json()['token']}"
    body = {
        "sku": "hgx-b200",
        "nodes": 1,
        "image": "ubuntu-24.04-cuda",
        "ssh_key": {"name": "k", "public_key": new_public_key()},
        "pay": True,
    }
    r = client.post("/api/v1/orders", json=body, headers=headers)
    assert r.status_code in (200, 201), r.text
    oid = r.json()["id"]
    owners = table_owners()
    paid = {t for _m, _d, t in writes}
    assert {"ledger_holds", "orders"} <= paid  # the check saw the checkout's statements
    r = client.get(f"/orders/{oid}/cancel")
    assert r.status_code == 200, r.text
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', r.text)
    action = re.search(r'name="expected_action" value="([^"]+)"', r.text)
    data = {"csrf_token": csrf.group(1) if csrf else ""}
    if action:
        data["expected_action"] = action.group(1)
    data["confirm"] = "yes"  # the refund-cancel's confirmation step
    r = client.post(f"/orders/{oid}/cancel", data=data)
    assert r.status_code in (200, 303), r.text
    # the refund issued its credit note (the ledger's own rows, through its ORM session)
    assert re.search(r"CN-\d{4}-000001", client.get("/receipts").text)
    wrong = [
        (module, table)
        for module, domain, table in writes
        if table in owners and owners[table] != domain and module not in COMPOSERS
    ]
    assert wrong == []
