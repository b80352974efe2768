"""Core routes: home, language, health, metrics, OpenAPI schema."""

from tests.authz import public

RULES = [
    public("GET", "/"),
    public("GET", "/lang/{code}", setup=lambda ctx: {"code": "zh_CN"}),
    public("GET", "/healthz"),
    public("GET", "/readyz"),
    public("GET", "/metrics", note="Prometheus text; no personal data"),
    public("GET", "/openapi.json"),
]
