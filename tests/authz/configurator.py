"""The sizing page and the sizing API: public, no personal data."""

from tests.authz import public

RULES = [
    public("GET", "/size"),
    public("POST", "/api/v1/sizing", json={}),
    public("GET", "/api/v1/sizing/presets"),
    public("POST", "/api/v1/sizing/launch", json={}),
    public("GET", "/size/launch"),
    public("GET", "/size/launch/file"),
]
