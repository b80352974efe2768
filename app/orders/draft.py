"""The order draft: what the deploy form (or the API) asks for, parsed and checked once.
``parse_draft`` turns the form's text into a typed ``OrderDraft``; ``check_draft`` is the one
set of rules. Neither touches the database."""

from __future__ import annotations

import hashlib
import json
import secrets
from dataclasses import asdict, dataclass, field
from typing import Any

from app.accounts.sshkeys import SshKeyError, looks_private, parse_public_key
from app.catalog import specs
from app.catalog.specs import SELF_SERVE_MAX_NODES
from app.errors import N_
from app.numbers import NumberError, parse_int
from app.orders.errors import ABOVE_SELF_SERVE
from app.text import multi_line, single_line

MAX_NODES = SELF_SERVE_MAX_NODES  # more is a cluster request (app.quotes)


NOTE_MAX = 80


FREE_TEXT_MAX = 4000


@dataclass
class OrderDraft:
    sku_id: str = ""
    quantity: int = 1
    image_id: str = ""
    ssh_key_ids: list[int] = field(default_factory=list)
    new_key_name: str = ""
    new_key_text: str = ""
    note_model_size: str = ""
    note_token_budget: str = ""
    note_node_count: int | None = None
    note_private_network: bool = False
    note_comm_pattern: str = ""
    note_free_text: str = ""
    sizing_query: str = ""
    quote_token: str = ""

    def fingerprint(self) -> str:
        d = asdict(self)
        d["ssh_key_ids"] = sorted(set(self.ssh_key_ids))
        d["new_key_text"] = " ".join(self.new_key_text.split())
        raw = json.dumps(d, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(raw.encode()).hexdigest()


def new_idempotency_key() -> str:
    return secrets.token_urlsafe(18)


def parse_count(value: Any) -> int | None:
    """A whole number (a count or an id) by the one number rule (app.numbers); None when
    absent or refused."""
    if value is None or isinstance(value, bool) or not isinstance(value, (int, str)):
        return None
    try:
        return parse_int(value, max_value=10**9)
    except NumberError:
        return None


def _truthy(value: Any) -> bool:
    return str(value).strip().lower() in ("1", "true", "on", "yes") if value is not None else False


def parse_draft(data: dict[str, Any]) -> tuple[OrderDraft, dict[str, str]]:
    """Raw input (the deploy form's text, the simulator) → a typed draft, then
    ``check_draft``. A number that does not parse becomes 0 ("not a valid count or key"),
    which ``check_draft`` refuses with the field's message. Never touches the database."""
    raw_ids = data.get("ssh_key_ids") or []
    if isinstance(raw_ids, (str, int)):
        raw_ids = [raw_ids]
    raw_nc = data.get("note_node_count")
    d = OrderDraft(
        sku_id=str(data.get("sku") or ""),
        quantity=parse_count(data.get("nodes")) or 0,
        image_id=str(data.get("image") or ""),
        ssh_key_ids=[parse_count(v) or 0 for v in raw_ids],
        new_key_name=str(data.get("new_key_name") or ""),
        new_key_text=str(data.get("new_key_text") or ""),
        note_model_size=str(data.get("note_model_size") or ""),
        note_token_budget=str(data.get("note_token_budget") or ""),
        note_node_count=None if raw_nc in (None, "") else (parse_count(raw_nc) or 0),
        note_private_network=_truthy(data.get("note_private_network")),
        note_comm_pattern=str(data.get("note_comm_pattern") or ""),
        note_free_text=str(data.get("note_free_text") or ""),
        sizing_query=str(data.get("sizing") or ""),
        quote_token=str(data.get("quote") or ""),
    )
    return d, check_draft(d)


def check_draft(d: OrderDraft) -> dict[str, str]:
    """The one validation of a draft, however it arrived (the form via ``parse_draft``, the
    API's typed ``OrderCreate``): field errors as English msgids (translate at render
    time). Trims ``d`` in place and clamps what would be echoed back. No database."""

    errors: dict[str, str] = {}
    d.sku_id = d.sku_id.strip()
    try:
        sku = specs.spec(d.sku_id)
    except KeyError:
        sku = None
        errors["sku"] = N_("Choose a node type.")
    if sku is not None and not sku.self_serve:
        errors["sku"] = N_(
            "This rack is sold through our sales team, not self-serve checkout. Ask for a quote."
        )
    if d.quantity > MAX_NODES:
        errors["nodes"] = ABOVE_SELF_SERVE
        d.quantity = 1
    elif d.quantity < 1:
        errors["nodes"] = N_("Enter a node count between 1 and 16.")
        d.quantity = 1
    d.image_id = d.image_id.strip()
    image_ids = {i.id for i in specs.all_images()}
    if d.image_id not in image_ids:
        errors["image"] = N_("Choose an operating system image.")
    elif sku is not None and not specs.image_fits(sku.id, d.image_id):
        errors["image"] = (
            N_("This image is for NVIDIA nodes; MI355X needs a ROCm image.")
            if sku.vendor == "amd"
            else N_("ROCm images run only on AMD MI355X; choose an Ubuntu image with CUDA.")
        )
    if any(i < 1 for i in d.ssh_key_ids):
        errors["ssh_keys"] = N_("Choose one of your saved keys.")
        d.ssh_key_ids = [i for i in d.ssh_key_ids if i >= 1]
    d.new_key_name = d.new_key_name.strip()[:80]
    d.new_key_text = d.new_key_text.strip()
    if d.new_key_text and not d.new_key_name:
        errors["new_key_name"] = N_("Give the new key a name, for example “laptop”.")
    if d.new_key_text:
        try:
            parse_public_key(d.new_key_text)
        except SshKeyError as e:
            errors["new_key_text"] = e.message
            if looks_private(d.new_key_text):
                d.new_key_text = ""  # never echo a private key back into the page
    if "new_key_text" in errors:
        errors.pop("new_key_name", None)  # one clear message about the key itself
    if (
        not d.ssh_key_ids
        and not d.new_key_text
        and "ssh_keys" not in errors
        and "new_key_text" not in errors  # a private key was pasted: that message says it
    ):
        errors["ssh_keys"] = N_(
            "Add at least one SSH public key: choose a saved key or paste a new one."
        )
    # the house's text rule (app/text.py): controls such as NUL and bidi marks removed
    for name in ("note_model_size", "note_token_budget"):
        value = single_line(str(getattr(d, name)))
        if len(value) > NOTE_MAX:
            errors[name] = N_("Keep this under 80 characters.")
        setattr(d, name, value[:NOTE_MAX])
    if d.note_node_count is not None and not 1 <= d.note_node_count <= 10000:
        errors["note_node_count"] = N_("Enter a whole number of nodes, or leave it empty.")
        d.note_node_count = None
    d.note_comm_pattern = single_line(d.note_comm_pattern)
    if len(d.note_comm_pattern) > 300:
        errors["note_comm_pattern"] = N_("Keep this under 300 characters.")
        d.note_comm_pattern = d.note_comm_pattern[:300]
    nodes_meant = max(d.quantity, d.note_node_count or 0)
    if d.note_private_network and nodes_meant > 1 and not d.note_comm_pattern:
        errors["note_comm_pattern"] = N_(
            "Describe the job's communication pattern so we can plan the private network "
            "(for example: data parallel all-reduce across nodes, tensor parallel inside)."
        )
    d.note_free_text = multi_line(d.note_free_text)
    if len(d.note_free_text) > FREE_TEXT_MAX:
        errors["note_free_text"] = N_("Keep the notes under 4,000 characters.")
        d.note_free_text = d.note_free_text[:FREE_TEXT_MAX]
    d.sizing_query = d.sizing_query.strip().lstrip("?")[:2000]
    d.quote_token = d.quote_token.strip()[:200]
    return errors
