"""JSON shapes of the orders API."""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictInt

from app.orders.models import Order, OrderHost
from app.web.forms import FormModel

MAX_SSH_KEY_IDS = 50


class NewKey(BaseModel):
    name: str = Field(max_length=80)
    public_key: str = Field(max_length=16000)


class Notes(BaseModel):
    model_size: str = ""
    token_budget: str = ""
    node_count: StrictInt | None = None  # JSON numbers only: true is not one node
    private_network: StrictBool = False
    comm_pattern: str = ""
    free_text: str = ""


class OrderCreate(BaseModel):
    sku: str = Field(examples=["hgx-b200"])
    # strict: JSON true/false or "2" are not a node count, nor 1 a yes to paying
    nodes: StrictInt = Field(default=1, examples=[1])
    image: str = Field(examples=["ubuntu-24.04-cuda"])
    ssh_key_ids: list[StrictInt] = Field(
        default_factory=list,
        max_length=MAX_SSH_KEY_IDS,  # no account keeps more (accounts.service.MAX_SSH_KEYS)
        description="ids of your saved SSH keys",
    )
    ssh_key: NewKey | None = Field(default=None, description="a new public key to save and use")
    notes: Notes = Field(default_factory=Notes)
    sizing: str = Field(default="", description="the /size query string this order came from")
    quote: str = Field(
        default="", description="a quote share token; its price holds until it expires"
    )
    pay: StrictBool = Field(default=False, description="pay the first month from the balance now")


class HostOut(BaseModel):
    hostname: str
    ip: str
    ssh_user: str
    ssh_port: int
    ssh_command: str
    host_key_fingerprints: list[str]

    @classmethod
    def of(cls, h: OrderHost) -> HostOut:
        port = f"-p {h.ssh_port} " if h.ssh_port and h.ssh_port != 22 else ""
        return cls(
            hostname=h.hostname,
            ip=h.ip,
            ssh_user=h.ssh_user,
            ssh_port=h.ssh_port,
            ssh_command=f"ssh {port}{h.ssh_user}@{h.ip}",
            host_key_fingerprints=[x for x in h.host_key_fingerprints.splitlines() if x.strip()],
        )


class EventOut(BaseModel):
    at: datetime
    kind: str
    message: str


# What ``OrderOut`` shows as the order stores it, under the same name.
AS_STORED = (
    "status",
    "unit_price_cents",
    "monthly_total_cents",
    "promised_date",
    "promise_explanation",
    "created_at",
    "paid_at",
    "delivered_at",
    "cancelled_at",
    "period_end",
    "cancel_at_period_end",
)


class OrderOut(BaseModel):
    id: int
    status: str
    late: bool
    sku: str
    nodes: int
    image: str
    unit_price_cents: int
    monthly_total_cents: int
    currency: str = "USD"
    promised_date: date | None
    promise_explanation: str
    created_at: datetime
    paid_at: datetime | None
    delivered_at: datetime | None
    cancelled_at: datetime | None
    period_end: datetime | None
    cancel_at_period_end: bool
    ssh_keys: list[dict[str, str]]
    notes: Notes
    hosts: list[HostOut] = Field(default_factory=list)
    events: list[EventOut] = Field(default_factory=list)
    links: dict[str, str] = Field(default_factory=dict)

    @classmethod
    def of(
        cls,
        o: Order,
        *,
        late: bool,
        ssh_keys: list[dict[str, str]],
        hosts: list[OrderHost] | None = None,
        events: list[EventOut] | None = None,
    ) -> OrderOut:
        assert o.id is not None
        return cls(
            id=o.id,
            late=late,
            sku=o.sku_id,
            nodes=o.quantity,
            image=o.image_id,
            **{name: getattr(o, name) for name in AS_STORED},
            ssh_keys=ssh_keys,
            notes=Notes(**{name: getattr(o, f"note_{name}") for name in Notes.model_fields}),
            hosts=[HostOut.of(h) for h in hosts or []],
            events=events or [],
            links={
                "self": f"/api/v1/orders/{o.id}",
                "review": f"/orders/{o.id}/review",
                "console": f"/console/orders/{o.id}",
            },
        )


# ---------------------------------------------------------------------------------------
# HTML forms (read with ``Annotated[Model, Form()]``; the service validates the content)
# ---------------------------------------------------------------------------------------


class DeployForm(FormModel):
    """POST /deploy. Text stays text here: ``service.parse_draft`` is the one validation."""

    sku: str = ""
    nodes: str = ""
    image: str = ""
    ssh_key_ids: list[str] = Field(default_factory=list)
    new_key_name: str = ""
    new_key_text: str = ""
    sizing: str = ""
    quote: str = ""
    note_model_size: str = ""
    note_token_budget: str = ""
    note_node_count: str = ""
    note_private_network: str = ""
    note_comm_pattern: str = ""
    note_free_text: str = ""
    account_mode: str = "signup"
    email: str = ""
    password: str = ""
    idempotency_key: str = ""

    def values(self) -> dict[str, Any]:
        """The form's values as the page and ``parse_draft`` take them (no password)."""
        v: dict[str, Any] = self.model_dump(
            exclude={"password", "idempotency_key", "note_private_network", "account_mode"}
        )
        v["ssh_key_ids"] = [str(x) for x in self.ssh_key_ids]
        v["note_private_network"] = self.note_private_network in ("1", "true", "on")
        v["account_mode"] = "login" if self.account_mode == "login" else "signup"
        return v


class PayForm(FormModel):
    """POST /orders/{id}/pay: the promise the customer saw and the form's idempotency key."""

    promise_date: str = ""
    idempotency_key: str = ""

    def expected_promise(self) -> date | None:
        try:
            return date.fromisoformat(self.promise_date) if self.promise_date else None
        except ValueError:
            return None


class TopupForm(FormModel):
    """POST /orders/{id}/topup."""

    amount: str = ""
    currency: str = ""


class OpsDelayForm(FormModel):
    """POST /staff/ops/orders/{id}/delay."""

    reason: str = ""
    new_estimate: str = ""


class OpsEndForm(FormModel):
    """POST /staff/ops/orders/{id}/end."""

    reason: str = ""
    confirm: bool = False  # the "yes, end it now" box


class OpsNodesForm(FormModel):
    """POST /staff/ops/orders/{id}/nodes."""

    node_ids: list[str] = Field(default_factory=list)


class OpsCredentialsForm(FormModel):
    """POST /staff/ops/orders/{id}/credentials: ``count`` hosts, each as ``ip_<i>``,
    ``fp_<i>``, ``host_id_<i>``, ``hostname_<i>`` (numbered fields, kept as extras)."""

    model_config = ConfigDict(extra="allow")

    ssh_user: str = ""
    ssh_port: str = ""
    count: str = ""

    def values(self) -> dict[str, Any]:
        out = {k: str(v) for k, v in (self.model_extra or {}).items() if k != "csrf_token"}
        out.update(ssh_user=self.ssh_user, ssh_port=self.ssh_port, count=self.count)
        return out
