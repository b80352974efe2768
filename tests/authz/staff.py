"""The simulation clock: staff see it, ops move it."""

from tests.authz import ops_only, staff_only

RULES = [
    staff_only("GET", "/staff/clock"),
    ops_only("POST", "/staff/clock"),
]
