# `make run` and `make test` work on a fresh machine: they create .venv and install pinned
# requirements first. Nothing here needs Redis; PostgreSQL only when DATABASE_URL says so.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
HOST ?= 127.0.0.1
PORT ?= 8000
WORKERS ?= 2
DEMO ?= demo
NEW_KEY ?=
# SEMANTIC=1: `make run` installs requirements/semantic.txt and turns search by meaning on.
SEMANTIC ?=

export CONNECT_DEVELOPMENT := 1

.PHONY: run port-free test setup test-setup migrate seed bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

$(VENV)/.base-installed: requirements/base.txt | $(BIN)/python
	$(BIN)/pip install --quiet -r requirements/base.txt
	touch $@

$(VENV)/.test-installed: requirements/test.txt requirements/base.txt | $(BIN)/python
	$(BIN)/pip install --quiet -r requirements/test.txt
	touch $@

$(VENV)/.semantic-installed: requirements/semantic.txt | $(BIN)/python
	$(BIN)/pip install --quiet -r requirements/semantic.txt
	touch $@

setup: $(VENV)/.base-installed $(if $(SEMANTIC),$(VENV)/.semantic-installed,)

test-setup: $(VENV)/.test-installed

# var/development marks this checkout as a development one: the commands README and docs/ show
# after `make run` then work in a plain shell, without CONNECT_DEVELOPMENT (connect/settings.py).
migrate: setup
	@mkdir -p var && echo "written by make: this checkout runs with the development secret" > var/development
	$(BIN)/python manage.py migrate --no-input -v 0

seed: migrate
	$(BIN)/python manage.py seed_demo --workspace $(DEMO)

# Before anything else: a taken port stops `make run` with one line, before it sets up, issues a
# key or prints a banner. SO_REUSEADDR only (not SO_REUSEPORT, which serve's sockets share).
port-free:
	@$(PYTHON) -c "import socket, sys; \
	s = socket.socket(socket.AF_INET6 if ':' in '$(HOST)' else socket.AF_INET); \
	s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); \
	s.bind(('$(HOST)', $(PORT)))" 2>/dev/null || { \
	echo "make run: port $(PORT) on $(HOST) is taken; pick another with: make run PORT=$$(($(PORT) + 1))" >&2; exit 1; }

# Links the service prints (`/`, OAuth metadata) name the address it was started on. The embedded
# default accepts loopback webhook receivers (the walkthrough's local receiver); a deployment
# never runs `make run`. The demo key is kept in var/demo-keys.json (per database) and printed
# again by the next run, so the webhooks made with it keep delivering across restarts;
# `make run NEW_KEY=1` revokes it, says so, and issues another (docs/webhooks.md: what that does
# to webhooks). It has the webhook scopes, so README's walkthrough runs with it.
run: export CONNECT_BASE_URL ?= http://$(HOST):$(PORT)
run: export CONNECT_WEBHOOKS_ALLOW_PRIVATE ?= 1
run: export CONNECT_SEMANTIC_SEARCH := $(if $(SEMANTIC),1,$(CONNECT_SEMANTIC_SEARCH))
run: port-free seed
	$(BIN)/python manage.py collectstatic --no-input -v 0
	$(if $(SEMANTIC),$(BIN)/python manage.py embed_segments --workspace $(DEMO),)
	$(BIN)/python -m compileall -q connect engine apps
	@key=$$($(BIN)/python manage.py issue_api_key $(DEMO) --member demo@example.com --replace \
	    --scopes svc:sessions:read,svc:transcripts:read,svc:boards:read,svc:webhooks:read,svc:webhooks:write \
	    --name "make run" --keep-in var/demo-keys.json $(if $(NEW_KEY),--reissue,) | tail -n 1); \
	session=$$($(BIN)/python manage.py shell -v 0 -c "from apps.recordings.models import Session; print(Session.objects.filter(workspace__slug='$(DEMO)', status='completed').order_by('-created_at').values_list('id', flat=True).first())"); \
	echo ""; \
	echo "Connect is starting on http://$(HOST):$(PORT)"; \
	echo "  API docs:  http://$(HOST):$(PORT)/docs   (OpenAPI: /openapi.json; index of links: /)"; \
	echo "  Admin:     http://$(HOST):$(PORT)/admin/   log in as demo@example.com / demo-password"; \
	echo "  Health:    http://$(HOST):$(PORT)/healthz  and  /readyz"; \
	echo "API key: $$key"; \
	echo "  reads everything and manages webhooks; kept in var/demo-keys.json, so the next make run prints it again"; \
	echo "  (make run NEW_KEY=1 revokes it and issues another: webhooks made with it turn inactive until re-enabled)"; \
	echo ""; \
	echo "  curl -H 'Authorization: Bearer $$key' 'http://$(HOST):$(PORT)/api/v1/sessions?limit=5'"; \
	echo "  curl -H 'Authorization: Bearer $$key' 'http://$(HOST):$(PORT)/api/v1/sessions/$$session/transcript'"; \
	echo "  curl -H 'Authorization: Bearer $$key' 'http://$(HOST):$(PORT)/api/v1/transcripts/search?query=budget'"; \
	echo ""; \
	exec $(BIN)/python manage.py serve --host $(HOST) --port $(PORT) --workers $(WORKERS)

# -rs: the summary ends with the reason of every skipped test, one line per reason with its count,
# so "N skipped" never goes unexplained (chromium, PostgreSQL or Redis missing, …).
test: test-setup
	$(BIN)/python -m pytest -q -n 2 --dist loadfile -rs

bench: test-setup
	$(BIN)/pip install --quiet -r bench/requirements.txt
	$(BIN)/python bench/rest.py

clean:
	rm -rf $(VENV) var/*.sqlite3* var/static
