"""A layout the customer pins keeps their degrees, and the node count is searched around it
as for any layout: a deadline or a run of years adds data-parallel ranks. It used to stay at
the fewest nodes that hold one block ("nothing finishes within 365 days … 770 days" while 8
nodes of the same layout finished in 193)."""

from __future__ import annotations

from datetime import date
from typing import Any

import pytest

from app.sizing import SizingError, size

JOB: dict[str, Any] = {
    "model": {"preset": "llama-3.1-70b"},
    "tokens": 2e12,
    "seq_len": 8192,
    "framework": "megatron",
    "sku": "hgx-b200",
}
PINNED = {"sharding": "zero1", "tp": 8, "pp": 2}


def _first(body: dict[str, Any]) -> dict[str, Any]:
    return size(body)["options"][0]  # type: ignore[no-any-return]


def test_a_deadline_adds_nodes_around_the_pinned_degrees() -> None:
    o = _first({**JOB, "max_days": 365, "parallelism": PINNED})
    assert o["fits"] and o["meets_deadline"] is True
    assert o["training_days"] <= 365
    lay = o["layout"]
    assert (lay["sharding"], lay["tp"], lay["pp"]) == ("zero1", 8, 2)
    assert o["nodes"] > 2 and lay["dp"] == o["nodes"] * 8 // 16


def test_a_tighter_deadline_takes_more_nodes() -> None:
    loose = _first({**JOB, "max_days": 365, "parallelism": PINNED})
    tight = _first({**JOB, "max_days": 60, "parallelism": PINNED})
    assert tight["meets_deadline"] is True and tight["training_days"] <= 60
    assert tight["nodes"] > loose["nodes"]
    assert (tight["layout"]["tp"], tight["layout"]["pp"]) == (8, 2)


def test_without_a_deadline_the_pinned_layout_is_priced_like_the_automatic_one() -> None:
    """ZeRO-3 with nothing else pinned is the layout the search chooses for this job: the
    same count, time and price (it was 3 nodes for 446 days at the same price as 15 nodes
    for 89)."""
    body = {"model": {"preset": "llama-3.1-70b"}, "tokens": 2e12, "sku": "hgx-b200"}
    auto = _first(body)
    pinned = _first({**body, "parallelism": {"sharding": "zero3"}})
    assert auto["layout"]["sharding"] == "zero3" and auto["layout"]["tp"] == 1
    assert (pinned["nodes"], pinned["rental_cost_usd"]) == (auto["nodes"], auto["rental_cost_usd"])
    assert pinned["training_days"] == auto["training_days"]


def test_a_pinned_node_count_is_kept() -> None:
    o = _first({**JOB, "max_days": 365, "nodes": 4, "parallelism": PINNED})
    assert o["nodes"] == 4 and o["layout"]["tp"] == 8 and o["layout"]["pp"] == 2


def test_every_count_offered_holds_whole_blocks_and_the_ep_group() -> None:
    """A MoE pinned at EP 8 x PP 2: whatever count the deadline takes, the data-parallel size
    is a whole number of blocks divisible by EP."""
    body = {
        "model": {"preset": "mixtral-8x7b"},
        "tokens": 1e12,
        "framework": "megatron",
        "sku": "hgx-h100",
        "max_days": 60,
        "parallelism": {"sharding": "zero1", "ep": 8, "pp": 2},
    }
    o = _first(body)
    lay = o["layout"]
    assert (lay["ep"], lay["pp"]) == (8, 2)
    assert (o["nodes"] * 8) % 2 == 0 and lay["dp"] % 8 == 0


# --- against every count pinned by hand ------------------------------------------------------

TODAY = date(2026, 12, 5)
# a stock table of the kind the configurator passes (up to N nodes delivered in D days)
DELIVERY = {
    "hgx-b200": ((2, 6.0), (5, 13.0), (16, 30.0)),
    "hgx-h100": ((3, 4.0), (16, 20.0)),
    "hgx-h200": ((16, 10.0),),
}
CASES = [
    ({"model": {"preset": "llama-3.1-8b"}, "tokens": 1e12, "framework": "fsdp2",
      "sku": "hgx-b200", "parallelism": {"sharding": "zero3"}}, [None, 20, 30, 36, 60]),
    ({"model": {"preset": "llama-3.1-70b"}, "tokens": 1e11, "framework": "deepspeed",
      "sku": "hgx-b200", "parallelism": {"sharding": "zero2"}}, [None, 40, 60]),
    ({"model": {"preset": "llama-3.1-8b"}, "tokens": 3e11, "sku": "hgx-h100",
      "parallelism": {"sharding": "zero3", "shard_group": 12}}, [None, 30]),
    ({"model": {"preset": "gemma-2-27b"}, "tokens": 1e10, "framework": "fsdp2",
      "sku": "hgx-b200",
      "parallelism": {"sharding": "zero1", "tp": 2, "cp": 2, "shard_group": 8}}, [None]),
]  # fmt: skip


def _answer(body: dict[str, Any]) -> dict[str, Any]:
    return size(body, delivery=DELIVERY, today=TODAY)["options"][0]  # type: ignore[no-any-return]


@pytest.mark.parametrize(("job", "deadlines"), CASES)
def test_the_search_is_never_worse_than_a_count_pinned_by_hand(
    job: dict[str, Any], deadlines: list[int | None]
) -> None:
    """The probe's cases: a deadline one count short of the count that meets it (4 nodes
    ending on day 30.03), a shard group the fewest blocks cannot hold ("no configuration
    fits" where 3 nodes did), a search that started above the cheapest count (shard group
    with CP), and a doubling that offered 8 nodes where 6 fit."""
    by_hand = []
    for n in range(1, 41):
        try:
            o = _answer({**job, "nodes": n})
        except SizingError:
            continue
        if o["fits"]:
            by_hand.append(o)
    assert by_hand
    cheapest = min(o["rental_cost_usd"] for o in by_hand)
    for days in deadlines:
        body = {**job, **({"max_days": days} if days else {})}
        got = _answer(body)
        assert got["fits"], (days, got["notes"])
        if days is None:
            assert got["rental_cost_usd"] <= cheapest * 1.10, days
            continue
        meeting = [o for o in by_hand if o["finish_days"] is not None and o["finish_days"] <= days]
        if meeting:
            assert got["meets_deadline"] is True, (days, got["nodes"], got["finish_days"])
            assert got["rental_cost_usd"] <= min(o["rental_cost_usd"] for o in meeting)
        else:  # the earliest finish is the one named
            dated = [o["finish_days"] for o in by_hand if o["finish_days"] is not None]
            assert got["finish_days"] <= min(dated) + 1e-6
