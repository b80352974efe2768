"""What an email says: one subject pattern (no doubled "Order #" prefix), never cut inside
a number or a word, in the recipient's language; a body with the facts and a link to the
page that acts on them."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from sqlmodel import Session, select

from app.accounts.models import User
from app.clock import utc
from app.notifications import service as mail
from app.notifications.models import OutboxEmail
from app.orders import renewals
from tests.ops.helpers import seed_catalog
from tests.ops.test_renewals import deliver, run

LONG = "Order #1: your balance is too low to renew the lease (US$16,900.00 due, US$16,900.00 short)"


WORD = re.compile(r"[A-Za-z0-9_$,.#]")  # characters that continue a word or a number


def _cut_between_words(original: str, out: str) -> bool:
    """``out`` is ``original`` cut (then "…") where no word or number continues."""
    head = out[:-1]
    if not original.startswith(head) or not out.endswith("…"):
        return False
    rest = original[len(head) :]
    after = rest.lstrip(",;:，；：、(（")  # punctuation the cut may drop before the ellipsis
    if after != rest:
        return not WORD.match(after[0])
    return not (WORD.match(head[-1]) and WORD.match(rest[0]))


def _numbers_whole(text: str) -> bool:
    amounts = re.findall(r"US\$[\d,.]*", text)
    return all(re.fullmatch(r"US\$\d{1,3}(,\d{3})*\.\d{2}", a) for a in amounts)


@pytest.mark.parametrize("limit", range(20, len(LONG) + 1))
def test_shorten_never_cuts_inside_a_number_or_word(limit: int) -> None:
    out = mail.shorten(LONG, limit)
    assert len(out) <= limit
    assert out == LONG or _cut_between_words(LONG, out), out
    assert _numbers_whole(out.rstrip("…"))


def test_shorten_cuts_chinese_between_characters_not_inside_numbers() -> None:
    text = "订单 #3：您的余额不足，无法续租（应付 US$16,900.00，还差 US$16,900.00）"
    for limit in range(10, len(text)):
        out = mail.shorten(text, limit)
        assert len(out) <= limit and _cut_between_words(text, out), out
        assert _numbers_whole(out.rstrip("…"))


def _emails(engine, kind: str) -> list[OutboxEmail]:  # type: ignore[no-untyped-def]
    with Session(engine) as s:
        return list(s.exec(select(OutboxEmail).where(OutboxEmail.kind == kind)).all())


def test_renewal_short_email_subject_once_and_body_links_the_order(
    engine, make_user, clock, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(mail, "BASE_URL", "https://gpus.example")
    seed_catalog(engine, clock.now())
    customer = make_user()
    order = deliver(engine, customer, clock.now())
    assert run(engine, utc(order.period_end) + timedelta(minutes=5)).short == 1
    (m,) = _emails(engine, "order.renewal_short")
    monthly = f"US${order.monthly_total_cents / 100:,.2f}"
    assert m.subject.count(f"Order #{order.id}") == 1
    assert m.subject == (
        f"Order #{order.id}: your balance is too low to renew the lease "
        f"({monthly} due, {monthly} short)"
    )
    assert len(m.subject) <= mail.SUBJECT_LIMIT
    assert f"{monthly} due" in m.body and "Top up before" in m.body  # the facts
    assert f"https://gpus.example/console/orders/{order.id}" in m.body  # where to act


def test_chinese_emails_have_one_prefix_and_whole_numbers(
    engine, make_user, clock, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(mail, "BASE_URL", "https://gpus.example")
    seed_catalog(engine, clock.now())
    customer = make_user()
    with Session(engine) as s:
        u = s.get(User, customer.id)
        assert u is not None
        u.locale = "zh_CN"
        s.add(u)
        s.commit()
    order = deliver(engine, customer, clock.now())
    end = utc(order.period_end)
    assert renewals.send_renewal_reminders(engine, end - timedelta(days=2)) == 1
    assert run(engine, end + timedelta(minutes=5)).short == 1
    for kind in ("order.renewal_reminder", "order.renewal_short"):
        (m,) = _emails(engine, kind)
        assert m.subject.startswith(f"订单 #{order.id}：")
        assert m.subject.count(f"订单 #{order.id}") == 1, m.subject
        assert len(m.subject) <= mail.SUBJECT_LIMIT
        assert _numbers_whole(m.subject), m.subject
        assert "请在控制台中查看并处理：" in m.body
        assert f"https://gpus.example/console/orders/{order.id}" in m.body
