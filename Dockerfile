# syntax=docker/dockerfile:1
# Multi-stage: build wheels and translations, then a slim non-root runtime that migrates
# and serves with several workers. Not exercised on the development machines (no Docker
# engine there); see README "What was and was not exercised".

FROM python:3.11-slim AS build
WORKDIR /src
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY pyproject.toml ./
COPY app ./app
COPY translations ./translations
RUN python -m venv /opt/venv \
 && /opt/venv/bin/pip install --upgrade pip \
 && /opt/venv/bin/python -c "import tomllib; print('\\n'.join(tomllib.load(open('pyproject.toml','rb'))['project']['dependencies']))" > requirements.txt \
 && /opt/venv/bin/pip install -r requirements.txt \
 && /opt/venv/bin/python -m app i18n compile

FROM python:3.11-slim AS runtime
# Fonts for PDFs: DejaVu (Latin) and Droid Sans Fallback (CJK, embedded in receipts/quotes).
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends fonts-dejavu-core fonts-droid-fallback \
 && rm -rf /var/lib/apt/lists/*
RUN groupadd --system app && useradd --system --gid app --home /srv/app --shell /usr/sbin/nologin app
WORKDIR /srv/app
ENV PATH=/opt/venv/bin:$PATH PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 \
    APP_ENVIRONMENT=production APP_SIMULATION=false APP_PAYMENT_PROVIDER=btcpay \
    APP_TRUSTED_PROXIES="" WEB_CONCURRENCY=4
COPY --from=build /opt/venv /opt/venv
COPY --chown=app:app alembic.ini ./
COPY --chown=app:app migrations ./migrations
COPY --chown=app:app templates ./templates
COPY --chown=app:app static ./static
COPY --chown=app:app translations ./translations
COPY --chown=app:app app ./app
COPY --from=build --chown=app:app /src/app/locale ./app/locale
RUN mkdir -p var/prometheus && chown -R app:app var
# Several workers: /metrics sums every worker's counters from files here (issue 13). A new
# container starts with it empty; set APP_METRICS_TOKEN to serve /metrics at all.
ENV PROMETHEUS_MULTIPROC_DIR=/srv/app/var/prometheus
USER app
EXPOSE 8000
HEALTHCHECK --interval=15s --timeout=3s --retries=3 \
  CMD python -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=2).status == 200 else 1)"
# Migrate (idempotent; Alembic serialises on its version table), then serve. Forwarding
# headers are the app's business (APP_TRUSTED_PROXIES), so uvicorn's own handling is off.
CMD ["sh", "-c", "python -m app db upgrade && exec uvicorn --factory app.main:asgi --host 0.0.0.0 --port 8000 --workers ${WEB_CONCURRENCY} --no-proxy-headers"]
