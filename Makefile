# Two commands for a newcomer: `make run` and `make test`. Everything else is optional.
SHELL := /bin/bash
PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
export PYTHONUNBUFFERED := 1

.PHONY: check-launch check-launch-megatron fonts run test lint fmt install migrate seed i18n serve worker bench lighthouse check-ledger migration regen-migration clean browsers

$(STAMP): pyproject.toml
	@command -v $(PY) >/dev/null 2>&1 || { echo "Python 3.11 is needed ($(PY) not found)"; exit 1; }
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

i18n: $(STAMP)
	$(BIN)/python -m app i18n compile

migrate: $(STAMP)
	@mkdir -p var
	$(BIN)/python -m app db upgrade

seed: migrate
	$(BIN)/python -m app seed

# Receipt PDFs embed a CJK font (Debian's fonts-droid-fallback); installed when missing and
# apt-get can run, otherwise a warning (everything else works; receipt PDFs then fail).
CJK_FONT := /usr/share/fonts/truetype/droid/DroidSansFallbackFull.ttf
fonts:
	@test -f $(CJK_FONT) || (command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ] && \
	  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq fonts-droid-fallback fonts-dejavu-core >/dev/null)) || \
	  test -f $(CJK_FONT) || echo "WARNING: install fonts-droid-fallback for receipt PDFs (sudo apt-get install fonts-droid-fallback)"

## make run: install, compile translations, migrate, seed demo data once, serve on :8000 (+ worker, + mail catcher)
run: install i18n fonts seed
	@echo "Serving on http://127.0.0.1:8000  (Ctrl-C stops the app, the worker and the mail catcher)"
	@trap 'trap - EXIT INT TERM; kill 0' EXIT INT TERM; \
	$(BIN)/python -m aiosmtpd -n -l 127.0.0.1:8025 -c aiosmtpd.handlers.Debugging stdout >var/mail.log 2>&1 & \
	$(BIN)/python -m app worker --interval 5 >var/worker.log 2>&1 & \
	$(BIN)/uvicorn --factory app.main:asgi --host 127.0.0.1 --port 8000 --loop uvloop --http app.web.http1:BoundedHttpTools --no-proxy-headers

serve: install i18n migrate
	$(BIN)/uvicorn --factory app.main:asgi --host 127.0.0.1 --port 8000 --workers $${WORKERS:-1} --loop uvloop --http app.web.http1:BoundedHttpTools --no-proxy-headers

worker: install
	$(BIN)/python -m app worker

## make lint: ruff (lint + format check), mypy, the import contracts (pyproject.toml),
## pylint's duplicate-code check over app/ (settings in pyproject.toml, [tool.pylint.*]) and
## the dead-code check (scripts/deadcode.py: vulture, what app/ defines and nothing calls)
lint: install
	$(BIN)/ruff check app tests bench scripts migrations
	$(BIN)/ruff format --check app tests bench scripts
	$(BIN)/mypy
	$(BIN)/lint-imports --no-cache
	$(BIN)/pylint --rcfile=pyproject.toml app
	$(BIN)/python scripts/deadcode.py

fmt: install
	$(BIN)/ruff check --fix app tests bench scripts
	$(BIN)/ruff format app tests bench scripts

## make test: install, lint, compile translations, run the whole suite
test: install i18n lint
	$(BIN)/python -m pytest $(PYTEST_ARGS)

browsers:
	@command -v chromium >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq chromium)

## make bench: every benchmark, as ratios against baselines in the same run → docs/benchmarks.md
## (needs PostgreSQL on 127.0.0.1 and pgbench; ~6–10 min on 2 cores; Lighthouse: make lighthouse)
bench: install i18n
	$(BIN)/python -m bench.run_all --skip lighthouse

## make lighthouse: Lighthouse on every page a customer sees → docs/benchmarks-lighthouse.md
lighthouse: install i18n
	cd tools/lighthouse && (test node_modules/.package-lock.json -nt package-lock.json || npm ci --no-audit --no-fund)
	$(BIN)/python scripts/lighthouse.py --simulation on

check-ledger: install
	$(BIN)/python -m app ledger check

regen-migration: install
	$(BIN)/python scripts/regen_initial_migration.py

migration: install
	$(BIN)/alembic revision --autogenerate -m "$(m)"

clean:
	rm -rf $(VENV) var .pytest_cache .mypy_cache .ruff_cache app/locale

## make check-launch: export a launch configuration for every framework from a grid of sizing
## answers (scripts/launch_grid.py) and check each with the framework's own parser in a
## separate tools environment (tools/launch/: CPU-only torch, torchtitan, DeepSpeed,
## accelerate, megatron-core; never the app's venv). Result: var/launch-check.log and
## var/launch-check-megatron.log; docs/launch-configs.md.
LAUNCH_TOOLS := tools/launch/.venv
$(LAUNCH_TOOLS)/.installed: tools/launch/requirements.txt tools/launch/constraints.txt \
  tools/launch/install_megatron.sh
	test -x $(LAUNCH_TOOLS)/bin/python || $(PY) -m venv $(LAUNCH_TOOLS)
	$(LAUNCH_TOOLS)/bin/python -m pip install -q -c tools/launch/constraints.txt 'torch==2.13.0+cpu'
	DS_BUILD_OPS=0 $(LAUNCH_TOOLS)/bin/python -m pip install -q --no-build-isolation \
	  -c tools/launch/constraints.txt -r tools/launch/requirements.txt
	bash tools/launch/install_megatron.sh $(LAUNCH_TOOLS)/bin/python
	touch $@

check-launch: install $(LAUNCH_TOOLS)/.installed
	@mkdir -p var
	rm -rf var/launch-grid
	$(BIN)/python scripts/launch_grid.py var/launch-grid
	@$(LAUNCH_TOOLS)/bin/python tools/launch/check.py var/launch-grid var/launch-check.json \
	  >var/launch-check.log 2>&1; rc=$$?; \
	  grep -E "^([0-9]+ engine|torchtitan|deepspeed|accelerate|megatron|planted|FAIL)" var/launch-check.log; \
	  grep -E "^[0-9]+ passed, [0-9]+ failed$$" var/launch-check.log | sed 's/^/check-launch: /'; \
	  test $$rc -eq 0 || exit $$rc
	@$(LAUNCH_TOOLS)/bin/python tools/launch/check_megatron.py var/launch-grid \
	  >var/launch-check-megatron.log 2>&1; rc=$$?; \
	  grep -E "^(megatron|planted|FAIL)" var/launch-check-megatron.log; exit $$rc

## make check-launch-megatron: Megatron-LM's own argument parser and validate_args over the
## grid's Megatron scripts only (part of check-launch; its own, smaller environment)
check-launch-megatron: install
	@mkdir -p var
	rm -rf var/launch-grid
	$(BIN)/python scripts/launch_grid.py var/launch-grid
	bash tools/launch/check_megatron.sh var/launch-grid
