"""The checkout simulator: customers through sizing, orders, top-ups, deliveries (on time
and late), cancellations and renewals on a FixedClock timeline — through the real services,
each step in its own transaction — then a summary and the ledger check.

Deterministic for a given seed (crypto rates come from the offline rate source).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, time, timedelta
from typing import Any

from sqlalchemy.engine import Engine
from sqlmodel import Session, col, select

from app.accounts.models import Role, User
from app.accounts.security import hash_password
from app.catalog import service as catalog
from app.catalog.seed import seed as seed_catalog
from app.clock import FixedClock, utc
from app.db import transaction
from app.errors import DomainError
from app.ledger import service as ledger
from app.orders import lease_end, ops, renewals
from app.orders import service as orders
from app.orders.lifecycle import PRE_DELIVERY, OrderStatus
from app.orders.models import Order
from app.payments import service as payments
from app.sizing import size

START = datetime(2027, 1, 4, 9, 0, tzinfo=UTC)  # a Monday
PRESETS = ("llama-3.1-8b", "qwen2.5-7b", "qwen2.5-14b", "qwen2.5-32b", "llama-3.1-70b")
TOKENS = (5e9, 2e10, 5e10, 1e11)
SSH_KEY = (
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl sim@laptop"
)


@dataclass
class Customer:
    index: int
    arrives: int  # day
    preset: str
    tokens: float
    topup_months: int  # months paid in advance by a top-up
    months_wanted: int  # then cancels (0: keeps renewing)
    forgets_topup: bool  # lets a renewal fall short
    rescues_in_grace: bool
    cancels_if_late: bool
    user_id: int | None = None
    order_id: int | None = None
    delivery_offset: int = 0  # days relative to the promise (ops side)
    cancelled_lease: bool = False


@dataclass
class Stats:
    customers: int = 0
    orders: int = 0
    paid: int = 0
    not_promisable: int = 0
    topups: int = 0
    topups_expired: int = 0
    delivered: int = 0
    delivered_late: int = 0
    late: int = 0
    refunds: int = 0
    refunded_cents: int = 0
    renewals: int = 0
    short_notices: int = 0
    suspended: int = 0
    ended: int = 0
    wiped: int = 0
    lease_cancels: int = 0
    errors: list[str] = field(default_factory=list)


def _fingerprint(rng: random.Random) -> str:
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    return "SHA256:" + "".join(rng.choice(alphabet) for _ in range(43))


class Simulation:
    def __init__(
        self,
        engine: Engine,
        *,
        seed: int,
        customers: int,
        days: int,
        out: Callable[[str], None] = print,
        progress_every: int = 10,
    ) -> None:
        self.engine = engine
        self.rng = random.Random(seed)
        self.days = days
        self.n = customers
        self.out = out
        self.progress_every = max(1, progress_every)
        self.clock = FixedClock(START)
        self.stats = Stats()
        self.people: list[Customer] = []
        self.ops_id: int | None = None
        self.failed_renewals: set[int] = set()

    # --- set-up ----------------------------------------------------------------------

    def setup(self) -> None:

        now = self.clock.now()
        self._hash = hash_password("simulated-customer-password")
        with transaction(self.engine) as s:
            seed_catalog(s, now)
            ops = s.exec(select(User).where(User.email == "ops@sim.test")).first()
            if ops is None:
                ops = User(
                    email="ops@sim.test",
                    password_hash=self._hash,
                    role=Role.ops.value,
                    created_at=now,
                )
                s.add(ops)
                s.flush()
            self.ops_id = ops.id
        horizon = max(1, int(self.days * 0.75))
        for i in range(self.n):
            r = self.rng
            self.people.append(
                Customer(
                    index=i,
                    arrives=r.randrange(horizon),
                    preset=r.choice(PRESETS),
                    tokens=r.choice(TOKENS),
                    topup_months=r.choice((1, 1, 1, 2, 3)),
                    months_wanted=r.choice((0, 0, 1, 2, 3)),
                    forgets_topup=r.random() < 0.15,
                    rescues_in_grace=r.random() < 0.5,
                    cancels_if_late=r.random() < 0.5,
                    delivery_offset=r.choice((-3, -2, -1, -1, 0, 0, 0, 0, 2, 4)),
                )
            )

    # --- helpers ---------------------------------------------------------------------

    def _ops(self, s: Session) -> User:
        u = s.get(User, self.ops_id)
        assert u is not None
        return u

    def _try(self, what: str, fn: Callable[[Session], Any]) -> Any:
        try:
            with transaction(self.engine) as s:
                return fn(s)
        except DomainError as e:
            self.stats.errors.append(f"{what}: {e.__class__.__name__}")
            return None

    def _op(self, what: str, fn: Callable[..., Any], **kw: Any) -> Any:
        """One staff step in its own transaction, done by the simulated ops engineer."""
        return self._try(what, lambda s: fn(s, actor=self._ops(s), now=self.clock.now(), **kw))

    def _topup(self, user_id: int, cents: int, *, pay: bool = True) -> bool:

        now = self.clock.now()

        def go(s: Session) -> bool:
            inv = payments.create_topup(
                s, user_id=user_id, amount_cents=cents, currency="USDT", now=now
            )
            if not pay:
                return False
            payments.record_chain_payment(s, inv, int(inv.due_units), now=now, confirmed=True)
            inv = payments.sync_invoice(s, inv.id or 0, now)
            return (inv.credited_cents or 0) >= cents

        ok = bool(self._try("top-up", go))
        self.stats.topups += 1
        return ok

    def _available(self, user_id: int) -> int:

        with Session(self.engine) as s:
            return ledger.available_cents(s, user_id)

    # --- the customer's side -----------------------------------------------------------

    def arrive(self, c: Customer) -> None:

        now = self.clock.now()
        self.stats.customers += 1
        result = size({"model": {"preset": c.preset}, "tokens": c.tokens})
        rec = result["recommendation"]
        # The recommended node first, then the other self-serve options that fit, cheapest
        # first; the customer takes the first one we can promise a date for.
        choices = [(rec.get("sku") or "hgx-h100", int(rec.get("nodes") or 1))]
        others = sorted(
            (o for o in result["options"] if o.get("fits")),
            key=lambda o: float(o.get("rental_cost_usd") or 0),
        )
        choices += [(o["sku"], int(o["nodes"])) for o in others]
        choices = [
            (sk, n) for sk, n in choices if sk not in ("gb300-nvl72", "mi355x") and 1 <= n <= 4
        ] or [("hgx-b200", 1)]
        sku, nodes = self._first_promisable(choices, now)
        image = (
            "ubuntu-24.04-rocm"
            if sku == "mi355x"
            else self.rng.choice(("ubuntu-22.04-cuda", "ubuntu-24.04-cuda"))
        )

        def sign_up_and_order(s: Session) -> int:
            u = User(
                email=f"customer{c.index}@sim.test",
                password_hash=self._hash,
                created_at=now,
                locale=self.rng.choice(("en", "zh_CN")),
            )
            s.add(u)
            s.flush()
            c.user_id = u.id
            draft, errors = orders.parse_draft(
                {
                    "sku": sku,
                    "nodes": str(nodes),
                    "image": image,
                    "new_key_name": "laptop",
                    "new_key_text": SSH_KEY,
                    "note_model_size": c.preset,
                    "note_token_budget": f"{c.tokens:.0e} tokens",
                    "note_node_count": str(nodes),
                    "note_private_network": "1" if nodes > 1 else "",
                    "note_comm_pattern": "FSDP inside, DP all-reduce across nodes"
                    if nodes > 1
                    else "",
                }
            )
            if errors:
                raise RuntimeError(f"simulated draft invalid: {errors}")
            order, _created = orders.create_order(
                s, user=u, draft=draft, idempotency_key=f"sim-{c.index}", now=now
            )
            return order.id or 0

        order_id = self._try("order", sign_up_and_order)
        if not order_id:
            return
        c.order_id = order_id
        self.stats.orders += 1
        assert c.user_id is not None
        with Session(self.engine) as s:
            o = s.get(Order, order_id)
            assert o is not None
            monthly = o.monthly_total_cents
        # Short: top up with crypto (sometimes the first invoice is left to expire).
        if self.rng.random() < 0.1:
            self._topup(c.user_id, monthly, pay=False)
        self._topup(c.user_id, monthly * c.topup_months)

        def pay(s: Session) -> Order:
            u = s.get(User, c.user_id)
            assert u is not None
            return orders.pay_order(
                s, user=u, order_id=order_id, idempotency_key=f"sim-pay-{c.index}", now=now
            )

        if self._try("pay", pay) is None:
            self.stats.not_promisable += 1
            return
        # A double click pays once.
        self._try("pay again", pay)
        self.stats.paid += 1

    def _first_promisable(self, choices: list[tuple[str, int]], now: datetime) -> tuple[str, int]:

        with Session(self.engine) as s:
            for sku, nodes in choices:
                if catalog.current_promise(s, sku, nodes, now).available:
                    return sku, nodes
        return choices[0]

    def customers_day(self) -> None:
        """Each customer with an open order looks at it (one query for all of them)."""
        people = {c.order_id: c for c in self.people if c.order_id is not None}
        open_states = [x.value for x in PRE_DELIVERY] + [OrderStatus.delivered.value]
        with Session(self.engine) as s:
            rows = s.exec(select(Order).where(col(Order.status).in_(open_states))).all()
        for o in rows:
            c = people.get(o.id or 0)
            if c is not None:
                self.customer_day(c, o)

    def customer_day(self, c: Customer, o: Order) -> None:

        if c.order_id is None or c.user_id is None:
            return
        now = self.clock.now()
        status = OrderStatus(o.status)

        def cancel(s: Session) -> Order:
            u = s.get(User, c.user_id)
            assert u is not None
            return orders.cancel_order(s, user=u, order_id=o.id or 0, now=now)

        if status in PRE_DELIVERY and orders.is_order_late(o, now) and c.cancels_if_late:
            if self._try("cancel late", cancel) is not None:
                self.stats.refunds += 1
                self.stats.refunded_cents += o.monthly_total_cents
            return
        if status == OrderStatus.delivered and o.period_end is not None:
            end = utc(o.period_end)
            wants_stop = c.months_wanted and o.periods_paid >= c.months_wanted
            if wants_stop and not o.cancel_at_period_end and end - now < timedelta(days=10):
                if self._try("cancel lease", cancel) is not None:
                    self.stats.lease_cancels += 1
                return
            if not wants_stop:
                in_grace = o.grace_until is not None
                soon = end - now <= timedelta(days=2)
                wants_to_pay = (soon and not c.forgets_topup) or (in_grace and c.rescues_in_grace)
                if wants_to_pay and self._available(c.user_id) < o.monthly_total_cents:
                    self._topup(c.user_id, o.monthly_total_cents * c.topup_months)

    # --- ops -----------------------------------------------------------------------------

    def ops_day(self) -> None:

        now = self.clock.now()
        today = now.date()
        with Session(self.engine) as s:
            arrived = [b.id for b in catalog.all_batches(s) if b.expected_on <= today]
        for bid in arrived:
            self._op("batch arrived", catalog.mark_batch_arrived, batch_id=bid)
        # Keep the supply coming: a batch per SKU every week.
        if (today - START.date()).days % 7 == 0:
            for sku in ("hgx-h100", "hgx-h200", "hgx-b200", "hgx-b300", "mi355x"):
                self._op(
                    "add batch",
                    catalog.add_batch,
                    sku_id=sku,
                    quantity=6,
                    expected_on=today + timedelta(days=10),
                )
        people = {c.order_id: c for c in self.people if c.order_id is not None}
        with Session(self.engine) as s:
            pending = s.exec(
                select(Order).where(col(Order.status).in_([x.value for x in PRE_DELIVERY]))
            ).all()
            ending = s.exec(select(Order.id).where(Order.status == OrderStatus.ended.value)).all()
        for o in pending:
            c = people.get(o.id or 0)
            offset = c.delivery_offset if c else 0
            assert o.promised_date is not None
            target = o.promised_date + timedelta(days=offset)
            if o.status == OrderStatus.paid.value and (target - today).days <= 2:
                self._op("provision", ops.start_provisioning, order_id=o.id or 0)
            if offset > 0 and today == o.promised_date and not o.delay_reason:
                self._op(
                    "delay",
                    ops.mark_delayed,
                    order_id=o.id or 0,
                    reason="Waiting for a replacement NIC",
                    new_estimate=target,
                )
            if today >= target:
                self._deliver(o.id or 0)
        for oid in ending:
            self._op("wipe", lease_end.confirm_wipe, order_id=oid or 0)

    def _deliver(self, order_id: int) -> None:

        now = self.clock.now()
        rng = self.rng

        def go(s: Session) -> bool:
            order = ops.load_order(s, order_id)
            if catalog.waiting_units(s, order_id) > 0:
                return False  # its batch has not arrived yet
            nodes = [n for n in catalog.nodes_for_order(s, order_id)]
            if len(nodes) >= order.quantity:
                ops.assign_nodes(
                    s,
                    actor=self._ops(s),
                    order_id=order_id,
                    node_ids=[n.id or 0 for n in nodes[: order.quantity]],
                    now=now,
                )
            hosts = ops.hosts_of(s, order_id)
            data = ops.CredentialsInput(
                ssh_user="ubuntu",
                hosts=[
                    ops.HostInput(
                        ip=f"198.51.{order_id % 250}.{i + 10}",
                        fingerprints=_fingerprint(rng),
                        host_id=hosts[i].id if i < len(hosts) else None,
                    )
                    for i in range(order.quantity)
                ],
            )
            ops.set_credentials(s, actor=self._ops(s), order_id=order_id, data=data, now=now)
            late = order.promised_date is not None and now.date() > order.promised_date
            ops.mark_delivered(s, actor=self._ops(s), order_id=order_id, now=now)
            return late

        late = self._try("deliver", go)
        if late is None:
            return
        self.stats.delivered += 1
        if late:
            self.stats.delivered_late += 1

    # --- the worker ------------------------------------------------------------------------

    def worker(self) -> None:

        now = self.clock.now()
        rep = self._try("renewals", lambda s: renewals.run_due_renewals(s, now))
        if rep is not None:
            self.stats.renewals += rep.renewed
            self.stats.short_notices += rep.short
            self.stats.suspended += rep.suspended
            self.stats.ended += rep.ended + rep.suspended
        late = self._try("late notices", lambda s: renewals.send_late_notices(s, now))
        self.stats.late += int(late or 0)
        self._try("invoice expiry", lambda s: payments.expire_due(s, now))

    # --- the run -----------------------------------------------------------------------------

    def run(self) -> Stats:
        self.setup()
        by_day: dict[int, list[Customer]] = {}
        for c in self.people:
            by_day.setdefault(c.arrives, []).append(c)
        for day in range(self.days):
            self.clock.set(datetime.combine(START.date() + timedelta(days=day), time(9, 0), UTC))
            self.worker()
            for c in by_day.get(day, []):
                self.arrive(c)
            self.ops_day()
            self.customers_day()
            # The evening round catches leases that ended during the day.
            self.clock.advance(timedelta(hours=12))
            self.worker()
            if (day + 1) % self.progress_every == 0 or day + 1 == self.days:
                self.out(self.progress_line(day + 1))
        with Session(self.engine) as s:
            self.stats.wiped = len(
                s.exec(select(Order.id).where(Order.status == OrderStatus.wiped.value)).all()
            )
        return self.stats

    def progress_line(self, day: int) -> str:
        st = self.stats
        return (
            f"day {day:>3}/{self.days}  customers {st.customers:>4}  orders {st.orders:>4}  "
            f"paid {st.paid:>4}  delivered {st.delivered:>4}  late {st.late:>3}  "
            f"refunds {st.refunds:>3}  renewals {st.renewals:>4}  ended {st.ended:>4}"
        )


def revenue_cents(engine: Engine) -> int:
    """Money recognised: posted first months and renewal charges (from the ledger)."""

    with Session(engine) as s:
        return ledger.recognised_revenue_cents(s)


def summary(stats: Stats, revenue: int, days: int) -> list[str]:
    settled = stats.delivered + stats.refunds
    late_rate = (stats.delivered_late + stats.refunds) / settled if settled else 0.0
    lines = [
        f"simulated {days} days, {stats.customers} customers",
        f"orders        {stats.orders} (paid {stats.paid}, could not be promised {stats.not_promisable})",
        f"top-ups       {stats.topups}",
        f"delivered     {stats.delivered} ({stats.delivered_late} after the promised date)",
        f"late notices  {stats.late}",
        f"refunds       {stats.refunds} (US${stats.refunded_cents / 100:,.2f} back to balances)",
        f"renewals      {stats.renewals} paid, {stats.short_notices} short notices, "
        f"{stats.suspended} suspended",
        f"lease cancels {stats.lease_cancels}; leases ended {stats.ended}; wiped {stats.wiped}",
        f"revenue       US${revenue / 100:,.2f}",
        f"late rate     {late_rate:.1%} of settled orders (late deliveries + late refunds)",
    ]
    if stats.errors:
        counts: dict[str, int] = {}
        for e in stats.errors:
            counts[e] = counts.get(e, 0) + 1
        top = ", ".join(f"{k} ×{v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])[:6])
        lines.append(f"refused steps {len(stats.errors)} ({top})")
    return lines
