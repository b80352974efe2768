"""The order draft's numbers follow the one number rule (app.numbers), form and API alike."""

from __future__ import annotations

import pytest

from app.orders import service
from tests.orders.conftest import new_public_key

BASE = {"sku": "hgx-b200", "image": "ubuntu-24.04-cuda", "new_key_name": "k"}


def _draft(**over: object) -> tuple[service.OrderDraft, dict[str, str]]:
    return service.parse_draft({**BASE, "new_key_text": new_public_key(), **over})


@pytest.mark.parametrize(("typed", "nodes"), [("2", 2), ("２", 2), (" 3 ", 3), (4, 4)])
def test_node_counts_people_type_are_accepted(typed: object, nodes: int) -> None:
    draft, errors = _draft(nodes=typed)
    assert errors == {} and draft.quantity == nodes


@pytest.mark.parametrize("typed", ["²", "-1", "1.5", "1_0", "", "two", True, -1, 0])
def test_other_node_counts_are_refused_with_the_field_message(typed: object) -> None:
    _draft_, errors = _draft(nodes=typed)
    assert errors == {"nodes": "Enter a node count between 1 and 16."}


@pytest.mark.parametrize("typed", ["²", "-2", "0", "10001"])
def test_planned_node_count_is_checked(typed: str) -> None:
    _draft_, errors = _draft(nodes="1", note_node_count=typed)
    assert set(errors) == {"note_node_count"}


def test_saved_key_ids_must_be_whole_numbers() -> None:
    _draft_, errors = _draft(ssh_key_ids=["³"], new_key_text="", new_key_name="")
    assert errors["ssh_keys"] == "Choose one of your saved keys."
