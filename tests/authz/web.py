"""Core routes: home, language, health, metrics, OpenAPI schema."""

from tests.authz import Rule, public, status

RULES = [
    public("GET", "/"),
    public("GET", "/lang/{code}", setup=lambda ctx: {"code": "zh_CN"}),
    public("GET", "/healthz"),
    public("GET", "/readyz"),
    Rule(
        "GET",
        "/metrics",
        anon=status(404),
        customer=status(404),
        sales=status(404),
        ops=status(404),
        note="Prometheus text behind a bearer token (APP_METRICS_TOKEN); 404 without one",
    ),
    public("GET", "/openapi.json"),
]
