"""Docs that run: every fenced block and command line in README.md and docs/*.md is either run
here as written (with only the substitutions a reader makes: a key, a base URL, `…` and
`[--option VALUE]` placeholders) or listed below with the reason it cannot be; a new block or
command that is neither fails `test_every_block_is_run_or_listed`.

Also: every `manage.py <command>` the pages name exists and accepts every `--flag` shown for it,
every `CONNECT_*` variable they name is read by connect/settings.py and every one it reads is
documented, every repository path they name exists, and bench/README.md's command lines name
scripts that exist and whose `--help` lists each flag used (benchmarks are not run).

Commands run in the environment a reader has after `make run`: the Makefile's
`CONNECT_DEVELOPMENT=1`, and a scratch SQLite database of this test (`DATABASE_URL`) instead of
var/connect.sqlite3. `curl` lines run with the system's curl when installed, else with httpx
(the same method, headers and URL, parsed from the line)."""

from __future__ import annotations

import ast
import base64
import hashlib
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import redirect_stdout
from io import StringIO
from pathlib import Path

import httpx
import pytest
from django.core.management import get_commands, load_command_class

from tests import docs
from tests.servers import ROOT, START_SECONDS, cmdline_of, descendants, free_port, wait_until

pytestmark = [pytest.mark.e2e]

README = ROOT / "README.md"
DOCS = ROOT / "docs"
BENCH_README = ROOT / "bench" / "README.md"
PYTHON = ".venv/bin/python"
CURL = shutil.which("curl")
COMMAND_SECONDS = 120  # one management command; only a hang reaches it

# Every fenced block of README.md and docs/*.md (named by page, info string and first line) and
# what checks it: a test of this module or another, or why it is not run here.
HERE = "tests/test_docs_run.py"
BLOCKS: dict[str, tuple[str, str]] = {
    "README.md ```sh make run    # set up (.venv, pinned requirements, SQLite under var/, demo data) and serve on "
    "http://127.0.0.1:8000": ("run", f"{HERE}::test_make_run_serves_and_its_curl_lines_answer"),
    "README.md ```sh export KEY=svc_…   # the key make run printed": ("substitute", f"{HERE}::test_ten_minutes"),
    'README.md ```sh curl -H "Authorization: Bearer $KEY" "$BASE/api/v1/sessions?status=completed&limit=2"':
        ("run", f"{HERE}::test_ten_minutes"),
    'README.md ```sh curl -N -H "Authorization: Bearer $KEY" "$BASE/api/v1/events/stream"':
        ("run", f"{HERE}::test_ten_minutes"),
    "README.md ```sh .venv/bin/python manage.py simulate_activity demo --sessions 1 --interval 0.2":
        ("run", f"{HERE}::test_ten_minutes"),
    'README.md ```sh curl -H "Authorization: Bearer $KEY" -H "Content-Type: application/json" \\':
        ("run", f"{HERE}::test_ten_minutes"),
    "README.md ```sh .venv/bin/python -c '": ("substitute", f"{HERE}::test_ten_minutes"),
    "README.md ```sh export SECRET_KEY=… CONNECT_BASE_URL=https://connect.example.com ALLOWED_HOSTS=connect.example.com \\":
        ("substitute", f"{HERE}::test_production_start_on_a_scratch_database"),
    'README.md ```sh .venv/bin/python manage.py create_workspace acme --name "Acme Inc."':
        ("substitute", f"{HERE}::test_operator_commands_in_order"),
    "README.md ```sh .venv/bin/python manage.py rotate_signing_key | list_signing_keys | retire_signing_keys":
        ("run", f"{HERE}::test_operator_commands_in_order"),
    "docs/events.md ```python connect-client from connect_client import Connect":
        ("substitute", "tests/client/test_doc_blocks.py::test_events_page_client_block_prints_live_events"),
    "docs/webhooks.md ```python connect-client from connect_client import WebhookVerificationError, webhooks":
        ("substitute", "tests/client/test_webhooks.py::test_webhooks_page_client_block_verifies_a_real_delivery"),
    "docs/events.md ``` GET /api/v1/events/stream?filters=<URL-encoded JSON array>     (optional)":
        ("not run", "the request's shape with <placeholders>; the curl line and the python client below send it"),
    'docs/events.md ```sh curl -N -H "Authorization: Bearer $KEY" https://connect.example.com/api/v1/events/stream':
        ("substitute", f"{HERE}::test_make_run_serves_and_its_curl_lines_answer"),
    "docs/events.md ``` : connected":
        ("not run", "a stream's frames as received (elided with …); tests/events/test_docs_client.py parses real ones"),
    "docs/events.md ```json [": ("run", f"{HERE}::test_json_blocks_parse"),
    'docs/events.md ``` {"items": [{"id": "evt_01jd8x5k3m6q2w9r7t4v0y1z3a", "type": "session.status_changed",':
        ("not run", "an event log page with … elisions; tests/events/test_log_api.py reads real ones"),
    'docs/events.md ```python client """A resilient Connect event-stream client: reconnects with exponential '
    'backoff and jitter,': ("run", "tests/events/test_docs_client.py::test_receives_in_order_and_resumes_after_a_server_restart_missing_nothing"),
    "docs/events.md ```sh .venv/bin/python manage.py simulate_activity acme --sessions 2 --interval 0.5   "
    "# live events to watch": ("run", f"{HERE}::test_operator_commands_in_order"),
    "docs/mcp.md ```sh claude mcp add --transport http connect https://connect.example.com/mcp":
        ("not run", "needs the Claude Code CLI and changes the user's Claude configuration"),
    "docs/mcp.md ```sh claude mcp add --transport http connect https://connect.example.com/mcp \\":
        ("not run", "needs the Claude Code CLI and changes the user's Claude configuration"),
    "docs/mcp.md ```json {": ("run", f"{HERE}::test_json_blocks_parse"),
    "docs/mcp.md ```sh npx @modelcontextprotocol/inspector@0.21.1 --cli https://connect.example.com/mcp --transport http \\":
        ("not run", "needs Node and the network (npx); bench/mcp_conformance.sh runs the Inspector CLI"),
    "docs/mcp.md ```python sdk import asyncio, httpx2":
        ("substitute", f"{HERE}::test_make_run_serves_and_its_curl_lines_answer"),
    "docs/operations.md ```yaml scrape_configs:": (
        "substitute", "tests/obs/test_prometheus.py::test_prometheus_sees_every_request_across_both_processes_and_one_webhook_failure"),
    "docs/webhooks.md ``` POST /api/v1/webhooks            (scopes: svc:webhooks:write and svc:sessions:read)":
        ("not run", "a request and answer with … elisions; tests/webhooks/test_api.py sends this body"),
    "docs/webhooks.md ``` POST <your url>":
        ("not run", "the delivery request's shape; the receiver block below verifies real ones"),
    'docs/transcripts.md ```sh curl -H "Authorization: Bearer $KEY" "https://connect.example.com/api/v1/sessions/$SESSION/transcript?format=vtt"':
        ("substitute", f"{HERE}::test_transcript_export_curl_lines_answer"),
    "docs/import.md ```sh .venv/bin/python manage.py import_recordings docs/samples/recordings.jsonl "
    "docs/samples/retro.vtt docs/samples/onboarding.srt --workspace demo":
        ("run", "tests/ingest/test_import_process.py::test_the_import_page_command_runs_as_written"),
    "docs/import.md ```json record {": ("run", "tests/ingest/test_import_process.py::test_the_import_page_record_imports"),
    'docs/ingest.md ```sh .venv/bin/python manage.py issue_ingest_key acme --name "meeting bot"':
        ("run", "tests/ingest/test_docs.py::test_the_ingest_page_runs"),
    "docs/ingest.md ```sh BASE=http://127.0.0.1:8000 INGEST_KEY=svc_…   # the key issue_ingest_key printed":
        ("substitute", "tests/ingest/test_docs.py::test_the_ingest_page_runs"),
    "docs/ingest.md ```python ingest-client from connect_client import Connect, IngestSegment":
        ("substitute", "tests/client/test_ingest.py::test_the_ingest_page_client_block_runs"),
    "docs/api/webhooks.md ```python verify-example import base64":
        ("run", f"{HERE}::test_the_worked_webhook_verification_runs_and_its_values_are_connects"),
    "README.md ```sh .venv/bin/python manage.py simulate_activity demo --sessions 1 --interval 2":
        ("run", f"{HERE}::test_ten_minutes"),
    "README.md ```sh export SESSION=…   # the id simulate_activity printed": ("substitute", f"{HERE}::test_ten_minutes"),
    'docs/oauth.md ```sh .venv/bin/python manage.py create_oauth_client "Meeting notes" --redirect-uri '
    'http://127.0.0.1:9100/callback --confidential': ("run", f"{HERE}::test_oauth_page_web_app_signs_in_and_reads"),
    'docs/oauth.md ```python oauth-web-app """A web app that signs members in with Connect and reads their sessions."""':
        ("substitute", f"{HERE}::test_oauth_page_web_app_signs_in_and_reads"),
    'docs/oauth.md ```python oauth-cli """A command-line tool that signs its user in with Connect (loopback '
    'redirect, PKCE)."""': ("substitute", f"{HERE}::test_oauth_page_command_line_tool_signs_in_refreshes_and_reads"),
    'docs/webhooks.md ```python receiver """A Connect webhook receiver: verifies every request, deduplicates, '
    'acknowledges quickly."""': ("run", "tests/webhooks/receiver.py::doc_receiver"),
    "docs/typescript-client.md ```sh npm --prefix clients/typescript ci":
        ("run", "tests/client_ts/test_typescript_client.py::package"),
    'docs/typescript-client.md ```ts import { Connect } from "connect-client";':
        ("run", "tests/client_ts/test_typescript_client.py::test_node_suite_against_live_servers"),
}

# Command lines in inline code or indented outside fenced blocks, other than bare references to
# a management command (`manage.py qcluster`, `serve --workers N`: checked by
# test_every_management_command_and_flag_named_exists).
INLINE: dict[str, tuple[str, str]] = {
    "make run": ("run", f"{HERE}::test_make_run_serves_and_its_curl_lines_answer"),
    "make test": ("not run", "the suite itself: this test is one of the tests it runs"),
    "make run PORT=8001": ("run", f"{HERE}::test_make_run_on_a_taken_port_stops_before_anything"),
    "make run HOST=0.0.0.0": ("not run", "every interface of the test machine; HOST is what the port check and "
                              "serve bind, the tests bind 127.0.0.1"),
    "make run WORKERS=4": ("substitute", f"{HERE}::test_make_run_serves_and_its_curl_lines_answer"),
    "make run NEW_KEY=1": ("run", f"{HERE}::test_a_second_make_run_keeps_the_key_and_new_key_replaces_it"),
    "make run SEMANTIC=1": ("not run", "installs requirements/semantic.txt into .venv; "
                            "tests/recordings/test_semantic_live.py serves with CONNECT_SEMANTIC_SEARCH=1"),
    'python -c "import os,base64; print(base64.urlsafe_b64encode(os.urandom(32)).decode())"':
        ("run", f"{HERE}::test_operator_commands_in_order"),
    'manage.py shell -c "from apps.recordings.services import compact_search_index; compact_search_index()"':
        ("run", f"{HERE}::test_operator_commands_in_order"),
    "manage.py qinfo": ("run", f"{HERE}::test_operator_commands_in_order"),
    ".venv/bin/python webapp.py": ("substitute", f"{HERE}::test_oauth_page_web_app_signs_in_and_reads"),
    ".venv/bin/python cli.py": ("substitute", f"{HERE}::test_oauth_page_command_line_tool_signs_in_refreshes_and_reads"),
    "pip install httpx": ("not run", "installs into the reader's environment; httpx is pinned in requirements"),
    "pip install pynacl": ("not run", "installs into the reader's environment; PyNaCl is pinned in requirements"),
    "pip install ./clients/python": ("run", "tests/client/installed.py::ensure_installed"),
    "pip install mcp": ("not run", "installs into the reader's environment; mcp is pinned in requirements/test.txt"),
    "npx @modelcontextprotocol/inspector@0.21.1": ("not run", "needs Node and the network; "
                                                   f"{HERE}::test_the_inspector_version_is_pinned_as_benchmarked"),
    "DATABASE_URL=postgres://…/connect_x REDIS_URL=redis://127.0.0.1:6379/N .venv/bin/python -m pytest -q tests/faults":
        ("not run", "PostgreSQL and Redis: `make test` runs tests/faults on .ci's PostgreSQL pass"),
    "DATABASE_URL=postgres://…/connect_faults .venv/bin/python bench/faults.py [--rounds 3] [--only redis,pg]":
        ("not run", "a benchmark on PostgreSQL; flags checked by test_bench_command_lines_name_scripts_and_flags"),
    "DATABASE_URL=postgres://…/connect_faults .venv/bin/python bench/faults.py --fairness --overload":
        ("not run", "a benchmark on PostgreSQL; flags checked by test_bench_command_lines_name_scripts_and_flags"),
    "DATABASE_URL=postgres://…/connect_faults .venv/bin/python bench/faults.py --hosts   # root":
        ("not run", "needs root (network namespaces); flags checked by test_bench_command_lines_name_scripts_and_flags"),
}
COMMAND_LIKE = re.compile(r"^([A-Z_]+=\S+ )*(\.venv/bin/\S+|python\S*|manage\.py|curl|make|npx|pip|claude|apt|apt-get) ")

# CONNECT_* names the pages use that are not Django settings, and where they are read.
NOT_SETTINGS = {
    "CONNECT_LB_BIND": "deploy/haproxy.cfg",
    "CONNECT_HOST1": "deploy/haproxy.cfg",
    "CONNECT_HOST2": "deploy/haproxy.cfg",
    "CONNECT_PUBLIC_HOST": "deploy/haproxy.cfg",
    "CONNECT_API_KEY": "docs/mcp.md",  # the Claude Desktop bridge's own environment
}
# Names in the pages that look like repository paths but are not.
NOT_PATHS = {
    "apps/core/openapi.postprocess": "a function: apps/core/openapi.py's postprocess",
    "docs/specification/2025-03-26": "a folder of the MCP specification's repository",
}


def page_name(path: Path) -> str:
    return str(path.relative_to(ROOT))


def all_pages() -> list[Path]:
    return docs.PAGES


# --- the inventory ---------------------------------------------------------------------------


def _where_exists(where: str) -> bool:
    path, _, name = where.partition("::")
    text = (ROOT / path).read_text()
    return bool(re.search(rf"^\s*(def|class) {re.escape(name)}\b", text, re.M))


def test_every_block_is_run_or_listed():
    found = {block.name for page in all_pages() for block in docs.blocks(page)}
    assert sorted(found - BLOCKS.keys()) == [], "blocks neither run nor listed (add them to BLOCKS)"
    assert sorted(BLOCKS.keys() - found) == [], "listed blocks no longer in the docs"
    for name, (kind, where) in BLOCKS.items():
        assert kind in {"run", "substitute", "not run"}, name
        if kind != "not run":
            assert _where_exists(where), f"{name}: {where} does not exist"


def _command_lines(page: Path) -> list[str]:
    return [s for s in docs.code_spans(page) + docs.indented_lines(page) if COMMAND_LIKE.match(s)]


def test_every_inline_command_is_run_or_listed():
    unlisted = []
    for page in all_pages():
        for line in _command_lines(page):
            if line in INLINE or _management_reference(line):
                continue
            unlisted.append(f"{page_name(page)}: {line}")
    assert unlisted == [], "inline commands neither run nor listed (add them to INLINE)"
    everywhere = {line for page in all_pages() for line in _command_lines(page)}
    assert sorted(INLINE.keys() - everywhere) == [], "listed inline commands no longer in the docs"
    for line, (kind, where) in INLINE.items():
        if kind != "not run":
            assert _where_exists(where), f"{line}: {where} does not exist"


# --- management commands and their flags -----------------------------------------------------


def _management_reference(line: str) -> bool:
    """`manage.py X …` or `X --flag …` with X a management command, and nothing to run beyond it."""
    words = line.split()
    if words[0] == "manage.py":
        words = words[1:]
    return bool(words) and words[0] in get_commands() and "-c" not in words and len(line.split(" # ")) == 1


def _invocations(text: str) -> list[tuple[str, list[str]]]:
    """(command, its --flags) for each management command a text invokes: `manage.py X …`,
    `manage.py X | Y | Z` (alternatives), and inline `X --flag` with X a command."""
    found = []
    text = text.replace("\\\n", " ")
    for line in text.splitlines():
        line = line.split(" # ")[0].split("   #")[0]
        for match in re.finditer(r"manage\.py (\S.*)", line):
            for alternative in match.group(1).split(" | "):
                words = alternative.replace("[", " ").replace("]", " ").split()
                found.append((words[0], [w.split("=")[0] for w in words[1:] if w.startswith("--")]))
    return found


def _all_invocations() -> list[tuple[str, str, list[str]]]:
    found = []
    for page in all_pages():
        for block in docs.blocks(page):
            if block.info == "sh":
                found += [(page_name(page), command, flags) for command, flags in _invocations(block.text)]
        for span in docs.code_spans(page) + docs.indented_lines(page):
            words = span.split()
            if "manage.py" in words:
                found += [(page_name(page), command, flags) for command, flags in _invocations(span)]
            elif words and words[0] in get_commands() and len(words) > 1 and words[1].startswith("--"):
                found.append((page_name(page), words[0], [w.split("=")[0] for w in words[1:] if w.startswith("--")]))
    return found


def test_every_management_command_and_flag_named_exists():
    commands = get_commands()
    invocations = _all_invocations()
    assert len({c for _, c, _ in invocations}) >= 15  # the extraction found the operator commands
    missing = []
    for page, command, flags in invocations:
        if command not in commands:
            missing.append(f"{page}: manage.py {command} does not exist")
            continue
        parser = load_command_class(commands[command], command).create_parser("manage.py", command)
        for flag in flags:
            if flag not in parser._option_string_actions:
                missing.append(f"{page}: manage.py {command} has no {flag}")
    assert missing == []


# --- settings --------------------------------------------------------------------------------


def test_connect_variables_documented_are_read_and_those_read_are_documented():
    read = set(re.findall(r'env(?:int|bool)?\("(CONNECT_[A-Z0-9_]+)"', (ROOT / "connect" / "settings.py").read_text()))
    assert len(read) > 20
    named: dict[str, str] = {}
    for page in all_pages():
        for name in re.findall(r"\bCONNECT_[A-Z0-9_]*[A-Z0-9]", page.read_text()):
            named.setdefault(name, page_name(page))
    unknown = {n: p for n, p in named.items() if n not in read and n not in NOT_SETTINGS}
    assert unknown == {}, "named in the docs, read nowhere in connect/settings.py"
    for name, where in NOT_SETTINGS.items():
        assert name in (ROOT / where).read_text(), f"{name}: not in {where}"
    assert sorted(read - named.keys()) == [], "read by connect/settings.py, documented nowhere"


def test_repository_paths_named_exist():
    missing = []
    for page in all_pages():
        for path in re.findall(r"(?<![\w/.{])((?:apps|connect|tests|bench|deploy|docs|requirements|templates|\.ci)"
                               r"/[\w./-]*\w)", page.read_text()):
            if path not in NOT_PATHS and not (ROOT / path).exists():
                missing.append(f"{page_name(page)}: {path}")
    assert missing == []
    assert all(any(p in page.read_text() for page in all_pages()) for p in NOT_PATHS)


# --- bench/README.md -------------------------------------------------------------------------


def _bench_command_lines() -> list[str]:
    lines = [b.text.replace("\\\n", " ") for b in docs.blocks(BENCH_README) if b.info == "sh"]
    return [line for text in lines for line in text.splitlines()] + docs.indented_lines(BENCH_README)


def test_bench_command_lines_name_scripts_and_flags():
    uses: dict[str, set[str]] = {}
    for line in _bench_command_lines() + [s for p in all_pages() for s in docs.indented_lines(p)]:
        line = line.split("#")[0]
        for match in re.finditer(r"(bench/[\w.]+\.(?:py|sh|txt))((?:\s+(?!\S*bench/)\S+)*)", line):
            script, rest = match.group(1), match.group(2)
            assert (ROOT / script).exists(), f"{script} does not exist: {line}"
            if script.endswith(".py"):
                words = rest.replace("[", " ").replace("]", " ").split()
                uses.setdefault(script, set()).update(w.split("=")[0] for w in words if w.startswith("--"))
    assert {"bench/rest.py", "bench/search.py", "bench/sse.py", "bench/faults.py"} <= uses.keys()
    env = {**reader_env(), "DATABASE_URL": "sqlite:///unused", "CONNECT_DEVELOPMENT": "1"}  # bench/README exports it
    helps = {
        script: subprocess.Popen([sys.executable, script, "--help"], cwd=ROOT, env=env, text=True,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        for script in uses
    }
    unknown = []
    for script, process in helps.items():
        out, _ = process.communicate(timeout=COMMAND_SECONDS)
        assert process.returncode == 0, f"{script} --help: {out}"
        listed = set(re.findall(r"--[a-z][\w-]*", out))
        unknown += [f"{script} {flag}" for flag in sorted(uses[script] - listed)]
    assert unknown == [], "flags used in bench/README.md that the script's --help does not list"


# --- running them ----------------------------------------------------------------------------


def reader_env(**extra: str) -> dict[str, str]:
    """The reader's shell after `make run`: nothing of the test run's own settings, no CONNECT_*
    variable (the Makefile exports CONNECT_DEVELOPMENT to its own children only; the commands
    work through the var/development mark `make run` leaves), then `extra`."""
    dropped = {"DJANGO_SETTINGS_MODULE", "DEBUG", "DATABASE_URL", "REDIS_URL", "SECRET_KEY", "ALLOWED_HOSTS",
               "STATIC_ROOT", "MAKEFLAGS", "MAKELEVEL", "MFLAGS", "PYTEST_XDIST_WORKER"}
    env = {k: v for k, v in os.environ.items() if k not in dropped and not k.startswith("CONNECT_")}
    return {**env, "PYTHONUNBUFFERED": "1", **extra}


def _argv(line: str, replace: dict[str, str]) -> list[str]:
    """A documented command line as argv, after the reader's substitutions (each must apply)."""
    for old, new in replace.items():
        assert old in line, f"nothing to substitute for {old!r} in {line!r}"
        line = line.replace(old, new)
    assert "…" not in line and not re.search(r"\[--", line), f"a placeholder left in {line!r}"
    argv = shlex.split(line, comments=True)
    if argv[0] == PYTHON and not (ROOT / PYTHON).exists():
        argv[0] = sys.executable
    return argv


def run(line: str, env: dict[str, str], replace: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run one documented command; it must exit 0."""
    argv = _argv(line, replace or {})
    done = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=COMMAND_SECONDS)
    assert done.returncode == 0, f"{line}\nexit {done.returncode}\n{done.stdout}\n{done.stderr}"
    return done


def run_line(line: str, env: dict[str, str], replace: dict[str, str] | None = None) -> str:
    """Run one documented command: exit 0 and its one result on the last stdout line (README's
    promise for the operator commands)."""
    done = run(line, env, replace)
    lines = done.stdout.splitlines()
    assert lines and lines[-1].strip(), f"{line}: no result on the last stdout line\n{done.stderr}"
    return lines[-1]


def _sh_block(page: Path, containing: str) -> str:
    [text] = [b.text for b in docs.blocks(page) if b.info == "sh" and containing in b.text]
    return text


def _sh_lines(text: str) -> list[str]:
    return [line for line in text.replace("\\\n", " ").splitlines() if line.strip()]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> dict[str, str]:
    """A fresh SQLite database, migrated as README's "Production start" migrates it."""
    folder = tmp_path_factory.mktemp("docs-scratch")
    return reader_env(DATABASE_URL=f"sqlite:///{folder / 'connect.sqlite3'}", STATIC_ROOT=str(folder / "static"))


def test_production_start_on_a_scratch_database(scratch):
    """The export line with its `…` secret filled in and this test's scratch database instead
    of PostgreSQL (the Redis URL stays: nothing below connects to it); no CONNECT_DEVELOPMENT."""
    export, *commands = _sh_lines(_sh_block(README, "export SECRET_KEY"))
    assert export.startswith("export ")
    assignments = dict(word.split("=", 1) for word in shlex.split(export)[1:])
    assignments["SECRET_KEY"] = secrets.token_urlsafe(50)  # for `…`
    assignments["DATABASE_URL"] = scratch["DATABASE_URL"]
    env = {**{k: v for k, v in scratch.items() if k != "CONNECT_DEVELOPMENT"}, **assignments}
    migrate, collectstatic, check, serve = commands
    run_line(migrate, env)
    assert "static files copied" in run_line(collectstatic, env)
    assert "identified 3 issues" in run(check, env).stderr  # the three docs/decisions/operations.md explains
    # `serve` on 0.0.0.0:8000 is not started here (a fixed port on every interface); README's
    # operator `serve` line runs the same command below, and its flags are checked above.
    assert _argv(serve, {})[2:4] == ["serve", "--host"]


def _serve_and_stop(argv: list[str], env: dict[str, str], port: int, log: Path) -> None:
    with log.open("w") as out:
        process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: _healthy(f"http://127.0.0.1:{port}") or process.poll() is not None,
                   what="serve to answer /healthz", timeout=START_SECONDS)
        assert process.poll() is None, log.read_text()
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=60)
    assert process.returncode == 0, log.read_text()


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=5).status_code == 200
    except httpx.TransportError:
        return False


def test_operator_commands_in_order(make_run, scratch, tmp_path):
    """README's "Operator commands", each line in order; beside them (on other threads, the
    scratch database takes concurrent writers) README's webhook commands, docs/events.md's
    commands once the workspace they name exists, and docs/operations.md's inline commands.
    After `make run` (as the docs say) and in a shell without CONNECT_DEVELOPMENT (issue 23:
    `simulate_activity` as written crashed without it)."""
    assert "CONNECT_DEVELOPMENT" not in scratch and (ROOT / "var" / "development").is_file()
    lines = _sh_lines(_sh_block(README, "create_workspace"))
    assert [shlex.split(line, comments=True)[2] for line in lines] == [
        "create_workspace", "add_member", "issue_api_key", "revoke_api_key", "deactivate_member",
        "create_oauth_client", "seed_demo", "serve", "simulate_activity", "purge_events",
    ]
    create_workspace, add_member, issue, revoke, deactivate, oauth, seed, serve, simulate, purge = lines
    env = scratch
    run(f"{PYTHON} manage.py migrate --no-input -v 0", env)  # a fresh clone's first step (make run does it)
    with ThreadPoolExecutor(3) as pool:
        beside = [pool.submit(_webhook_commands, env), pool.submit(_operations_commands, env)]
        assert "acme" in run_line(create_workspace, env)
        beside.append(pool.submit(_events_commands, env))
        run_line(add_member, env, {"'…'": "'a long enough password'", "[--staff]": "--staff"})
        first = run_line(issue, env, {"[--replace]": ""})
        key = run_line(issue, env, {"[--replace]": "--replace"})  # revokes `first`
        assert first.startswith("svc_") and key.startswith("svc_") and key != first
        live = run(f"{PYTHON} manage.py shell -v 0 -c \"from apps.tenancy.models import ApiKey; "
                   "print(list(ApiKey.objects.filter(name='CRM sync', revoked_at__isnull=True)"
                   ".values_list('prefix', flat=True)))\"", env)
        [prefix] = ast.literal_eval(live.stdout.strip())  # one live "CRM sync" key: the second
        assert key.startswith(prefix) and not first.startswith(prefix)
        run_line(revoke, env, {"svc_…": key})
        run_line(deactivate, env)
        run_line(oauth, env)
        run_line(seed, env, {"[--workspace demo]": "--workspace demo", "[--sessions N]": "--sessions 2",
                             "[--segments M]": "--segments 3"})
        port = free_port()
        argv = _argv(serve, {"[--host H]": "--host 127.0.0.1", "[--port P]": f"--port {port}",
                             "[--workers N]": "--workers 1"})
        _serve_and_stop(argv, env, port, tmp_path / "serve.log")
        run_line(simulate, env, {"[--sessions N]": "--sessions 1", "[--interval S]": "--interval 0.01"})
        run_line(purge, env)
        for future in beside:
            future.result()


def _webhook_commands(env: dict[str, str]) -> None:
    """README, Webhooks: `A | B | C` are alternatives, each run; sweep without `--every` (which
    repeats until stopped); qcluster runs until stopped (`serve` starts the same cluster)."""
    rotate_list_retire, purge_sweep, qcluster = _sh_lines(_sh_block(README, "rotate_signing_key"))
    for command in ["rotate_signing_key", "list_signing_keys", "retire_signing_keys"]:
        assert command in rotate_list_retire
        run_line(f"{PYTHON} manage.py {command}", env)
    assert "[--every S]" in purge_sweep
    for command in ["purge_webhook_deliveries", "sweep_webhook_deliveries"]:
        assert command in purge_sweep
        run_line(f"{PYTHON} manage.py {command}", env)
    assert shlex.split(qcluster, comments=True) == [PYTHON, "manage.py", "qcluster"]


def _events_commands(env: dict[str, str]) -> None:
    """docs/events.md, "Operating it": as written (the workspace `acme` exists by now)."""
    for line in _sh_lines(_sh_block(DOCS / "events.md", "simulate_activity")):
        run_line(line, env)


def _operations_commands(env: dict[str, str]) -> None:
    """docs/operations.md's inline commands, with README's `.venv/bin/python` in front."""
    spans = docs.code_spans(DOCS / "operations.md")
    compact = next(s for s in spans if s.startswith("manage.py shell -c"))
    run(f"{PYTHON} {compact}", env)
    assert "manage.py qinfo" in spans
    run(f"{PYTHON} manage.py qinfo", env)
    # README: "errors go to stderr with a non-zero exit" (and nothing on stdout).
    refused = subprocess.run([*_argv(f"{PYTHON} manage.py revoke_api_key svc_unknown", {})], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=COMMAND_SECONDS)
    assert refused.returncode != 0 and refused.stderr.strip() and not refused.stdout.strip()
    keygen = next(s for s in spans if s.startswith("python -c"))
    secret = run_line(keygen, env, {"python": sys.executable})
    assert len(base64.urlsafe_b64decode(secret)) == 32


# --- make run, its curl lines and the snippets that talk to a server --------------------------


class MakeRun:
    """`make run` on a scratch database and a free port: what it printed, the server it started."""

    def __init__(self, folder: Path, log: str = "make-run.log", extra: tuple[str, ...] = ()) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = folder / log
        self.env = env = reader_env(DATABASE_URL=f"sqlite:///{folder / 'connect.sqlite3'}",
                                    STATIC_ROOT=str(folder / "static"))
        assert "CONNECT_DEVELOPMENT" not in env  # the Makefile exports it
        # `-o .venv/.base-installed`: `make test` installed requirements/test.txt (which includes
        # base.txt) into .venv; the test never installs anything. WORKERS=1: one daphne process.
        command = ["make", "-o", ".venv/.base-installed", "run", f"PORT={self.port}", "WORKERS=1", *extra]
        with self.log.open("w") as out:
            self.process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                            start_new_session=True)

    def wait_ready(self) -> None:
        wait_until(lambda: self.process.poll() is not None or (len(self.curl_lines()) == 3 and _healthy(self.url)),
                   what="make run to print its curl lines and serve", timeout=2 * START_SECONDS, every=0.3)
        assert self.process.poll() is None, self.log.read_text()

    def output(self) -> str:
        return self.log.read_text()

    def curl_lines(self) -> list[str]:
        return [line.strip() for line in self.output().splitlines() if line.strip().startswith("curl ")]

    def key(self) -> str:
        return re.search(r"^API key: (svc_\S+)$", self.output(), re.M).group(1)

    def stop(self) -> None:
        """SIGTERM to `serve` itself (operations.md: not to its process group), then whatever is left."""
        for pid in descendants(self.process.pid):
            if b"manage.py\0serve" in cmdline_of(pid):
                os.kill(pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            pass
        # Whatever is left in make's process group (a task cluster orphaned by a serve that was
        # stopped half-way through starting it) goes too: a test leaves no process behind.
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait(timeout=10)


@pytest.fixture(scope="module", autouse=True)
def make_run_started(request, tmp_path_factory):
    """`make run` is started with the module when any of its selected tests needs it, so it sets
    up and seeds while the commands above run."""
    if not any("make_run" in item.fixturenames for item in request.session.items if item.module is request.module):
        yield None
        return
    started = MakeRun(tmp_path_factory.mktemp("make-run"))
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture(scope="module")
def make_run(make_run_started):
    make_run_started.wait_ready()
    return make_run_started


def curl(line: str, *, env: dict[str, str] | None = None) -> str:
    """A documented curl line's output: the system's curl through a shell (for `$KEY`), or httpx
    with the line's -H headers and URL when curl is not installed."""
    if CURL:
        done = subprocess.run(["bash", "-c", line], env=env, capture_output=True, text=True, timeout=COMMAND_SECONDS)
        assert done.returncode == 0, f"{line}\n{done.stderr}"
        return done.stdout
    words = shlex.split(os.path.expandvars(line) if env is None else _expand(line, env))
    assert words[0] == "curl" and set(w for w in words[1:] if w.startswith("-")) <= {"-H", "-N"}, line
    headers = dict(words[i + 1].split(": ", 1) for i, w in enumerate(words) if w == "-H")
    [url] = [w for i, w in enumerate(words[1:], 1) if not w.startswith("-") and words[i - 1] != "-H"]
    return httpx.get(url, headers=headers, timeout=30).text


def _expand(line: str, env: dict[str, str]) -> str:
    return re.sub(r"\$(\w+)", lambda m: env.get(m.group(1), ""), line)


def test_make_run_serves_and_its_curl_lines_answer(make_run):
    assert f"Connect is starting on {make_run.url}" in make_run.output()
    sessions, transcript, search = make_run.curl_lines()
    listed = json.loads(curl(sessions))
    assert len(listed["items"]) == 5 and "nextCursor" in listed
    flat = json.loads(curl(transcript))
    assert flat["transcript"] and "None" not in transcript  # a completed demo session was found
    hits = json.loads(curl(search))
    assert hits["items"], "the demo data mentions a budget"


def test_make_run_links_every_entry_point_from_the_index(make_run):
    """`/` names the address `make run` started on, and every link it gives is served (the
    Bearer-protected ones answer 401 to this unauthenticated GET, never 404)."""
    links = httpx.get(f"{make_run.url}/", timeout=30).json()["links"]
    for name, url in links.items():
        if name == "authorizationServerMetadata":
            continue  # CONNECT_AUTH_URL, the same server here
        assert url.startswith(make_run.url), (name, url)
    for name, url in links.items():
        status = httpx.get(url, timeout=30).status_code
        # /mcp is POST-only (stateless, no GET stream): 405 is its answer to a GET.
        assert status in {200, 302, 401} or (name, status) == ("mcp", 405), (name, url, status)


def test_make_run_on_a_taken_port_stops_before_anything(make_run, tmp_path):
    """issue 23 point 6: one line saying the port is taken and how to pick another, before any
    setup, key or banner (the scratch database is not even created)."""
    database = tmp_path / "connect.sqlite3"
    env = reader_env(DATABASE_URL=f"sqlite:///{database}", STATIC_ROOT=str(tmp_path / "static"))
    done = subprocess.run(["make", "-o", ".venv/.base-installed", "run", f"PORT={make_run.port}", "WORKERS=1"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=COMMAND_SECONDS)
    assert done.returncode != 0
    ours = [line for line in done.stderr.splitlines() if not line.startswith("make: ***")]
    assert ours == [f"make run: port {make_run.port} on 127.0.0.1 is taken; pick another with: "
                    f"make run PORT={make_run.port + 1}"], done.stderr
    assert done.stdout == "" and not database.exists()
    # README's spelling of the fix.
    assert "make run PORT=8001" in docs.code_spans(README)


def test_a_second_make_run_keeps_the_key_and_new_key_replaces_it(make_run, tmp_path_factory):
    """Repeated `make run`s on one database keep one live demo key: the second run prints the
    first run's key again (kept in var/demo-keys.json, so webhooks made with it keep delivering);
    `make run NEW_KEY=1` revokes it, says so, and prints a new one (a failed run, above, issues none)."""
    first_key = make_run.key()
    folder = Path(make_run.env["DATABASE_URL"].removeprefix("sqlite:///")).parent
    sessions = f"{make_run.url}/api/v1/sessions?limit=1"
    again = MakeRun(folder, log="make-run-again.log")
    try:
        again.wait_ready()
        assert again.key() == first_key
    finally:
        again.stop()
    renewed = MakeRun(folder, log="make-run-new-key.log", extra=("NEW_KEY=1",))
    try:
        renewed.wait_ready()
        second_key = renewed.key()
        assert second_key != first_key
        assert f"revoked API key {first_key[:10]}…" in renewed.output()
        assert httpx.get(sessions, headers={"Authorization": f"Bearer {second_key}"}, timeout=30).status_code == 200
        assert httpx.get(sessions, headers={"Authorization": f"Bearer {first_key}"}, timeout=30).status_code == 401
        live = subprocess.run(
            [PYTHON, "manage.py", "shell", "-v", "0", "-c",
             "from apps.tenancy.models import ApiKey; "
             "print(ApiKey.objects.filter(name='make run', revoked_at__isnull=True).count())"],
            cwd=ROOT, env=make_run.env, capture_output=True, text=True, timeout=COMMAND_SECONDS)
        assert live.stdout.strip() == "1", live.stderr
    finally:
        renewed.stop()
    make_run.key = lambda: second_key  # the tests that follow use the live key


def _section_blocks(page: Path, heading: str) -> list[docs.Block]:
    lines = page.read_text().splitlines()
    start = lines.index(heading) + 1
    end = next((i for i in range(start, len(lines)) if lines[i].startswith("## ")), len(lines))
    return [b for b in docs.blocks(page) if start < b.line <= end]


def _json_values(text: str) -> list:
    decoder, values, at = json.JSONDecoder(), [], 0
    text = text.strip()
    while at < len(text):
        value, at = decoder.raw_decode(text, at)
        values.append(value)
        while at < len(text) and text[at].isspace():
            at += 1
    return values


def test_ten_minutes(make_run, tmp_path):
    """README's "Ten minutes with Connect", block by block in order, as a reader runs them in a
    second terminal after `make run`: with only the reader's substitutions (the printed key, this
    server's port for 8000, a free port for the receiver's 9000) and make run's database."""
    blocks = _section_blocks(README, "## Ten minutes with Connect")
    setup, read, stream, simulate, slow_meeting, session_stream, mcp, webhook = blocks
    assert all(block.info == "sh" for block in blocks)
    assert "http://127.0.0.1:8000" in setup.text and "svc_…" in setup.text
    exported = subprocess.run(
        ["bash", "-c", setup.text.replace("svc_…", make_run.key()).replace("http://127.0.0.1:8000", make_run.url)
         + 'echo "$KEY $BASE"'], capture_output=True, text=True, timeout=COMMAND_SECONDS)
    key, base = exported.stdout.split()
    assert (key, base) == (make_run.key(), make_run.url)
    shell = {**make_run.env, "KEY": key, "BASE": base}

    def bash(text: str) -> str:
        done = subprocess.run(["bash", "-c", text], cwd=ROOT, env=shell, capture_output=True, text=True,
                              timeout=COMMAND_SECONDS)
        assert done.returncode == 0, f"{text}\n{done.stdout}\n{done.stderr}"
        return done.stdout

    # 2. Read: completed sessions only, and a search hit.
    sessions, hits = _json_values(bash(read.text))
    assert 1 <= len(sessions["items"]) <= 2 and {s["status"] for s in sessions["items"]} == {"completed"}
    assert len(hits["items"]) == 1

    # 3. Stream in one terminal, the simulated meeting in another: its events arrive.
    assert "curl -N" in stream.text
    streamed = tmp_path / "stream.out"
    with streamed.open("w") as out:
        reader = subprocess.Popen(["bash", "-c", "exec " + stream.text.strip()], cwd=ROOT, env=shell, stdout=out,
                                  stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: streamed.read_text().startswith(": connected"), what="the stream to open",
                   timeout=COMMAND_SECONDS)
        output = bash(simulate.text)
        [created] = re.findall(r"^session (\S+) created \(1/1\)", output, re.M)
        wait_until(lambda: f'"sessionId":"{created}"' in streamed.read_text().replace(" ", "")
                   and "event: session.status_changed" in streamed.read_text(),
                   what="the simulated session's events on the stream", timeout=COMMAND_SECONDS)
        assert "event: session.created" in streamed.read_text()
    finally:
        reader.terminate()
        reader.wait(timeout=30)

    # 3b. One session's transcript, segment by segment: the slower meeting's id as the reader
    # copies it from its first line, then the filtered stream.
    meeting_out = tmp_path / "meeting.out"
    with meeting_out.open("w") as out:
        meeting = subprocess.Popen(["bash", "-c", "exec " + slow_meeting.text.strip()], cwd=ROOT, env=shell, stdout=out,
                                   stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: re.search(r"^session \S+ created", meeting_out.read_text(), re.M),
                   what="the slower meeting to print its id", timeout=COMMAND_SECONDS)
        session = re.search(r"^session (\S+) created", meeting_out.read_text(), re.M).group(1)
        assert session_stream.text.count("…") == 1 and "export SESSION=…" in session_stream.text
        segments_out = tmp_path / "segments.out"
        with segments_out.open("w") as out:
            segment_reader = subprocess.Popen(["bash", "-c", session_stream.text.replace("…", session)], cwd=ROOT,
                                              env=shell, stdout=out, stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            wait_until(lambda: "event: transcript.segment.created" in segments_out.read_text(),
                       what="the session's segments on the filtered stream", timeout=COMMAND_SECONDS)
        finally:
            os.killpg(segment_reader.pid, signal.SIGTERM)
            segment_reader.wait(timeout=30)
        frames = [json.loads(line.removeprefix("data: ")) for line in segments_out.read_text().splitlines()
                  if line.startswith("data: ")]
        assert frames and {(f["type"], f["sessionId"]) for f in frames} == {("transcript.segment.created", session)}
        assert all(frame["data"]["text"] for frame in frames)
    finally:
        meeting.terminate()
        meeting.wait(timeout=30)

    # 4. MCP by hand.
    [reply] = _json_values(bash(mcp.text))
    assert reply["id"] == 1 and "result" in reply and not reply["result"].get("isError"), reply
    listed = reply["result"]["structuredContent"] if "structuredContent" in reply["result"] else \
        json.loads(reply["result"]["content"][0]["text"])
    assert len(listed["items"]) == 2

    # 5. The webhook walkthrough: receiver, subscription, a new session; the receiver prints the
    # signed session.created delivery.
    receiver_port = free_port()
    assert webhook.text.count("9000") == 2
    received = tmp_path / "webhook.out"
    with received.open("w") as out:
        walkthrough = subprocess.Popen(["bash", "-c", webhook.text.replace("9000", str(receiver_port))], cwd=ROOT,
                                       env=shell, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        assert walkthrough.wait(timeout=COMMAND_SECONDS) == 0, received.read_text()
        text = received.read_text()  # curl's answer (no newline after it), then simulate_activity's lines
        created_webhook, _ = json.JSONDecoder().raw_decode(text, text.index("{"))
        assert created_webhook["url"] == f"http://127.0.0.1:{receiver_port}/hook", created_webhook
        [new_session] = re.findall(r"session (\S+) created \(1/1\)", text)
        wait_until(lambda: f'"sessionId":"{new_session}"' in received.read_text().replace(" ", ""),
                   what="the receiver to print the delivery", timeout=2 * COMMAND_SECONDS)
        line = next(l for l in received.read_text().splitlines() if new_session in l and l.startswith("t="))
        signature, body = line.split(" ", 1)
        assert re.fullmatch(r"t=\d+,kid=\S+,v1=\S+", signature) and json.loads(body)["type"] == "session.created"
    finally:
        try:
            os.killpg(walkthrough.pid, signal.SIGTERM)  # the receiver the block left running with `&`
        except ProcessLookupError:
            pass
        walkthrough.wait(timeout=30)


def test_events_curl_line_opens_a_stream(make_run):
    """docs/events.md's curl line with the reader's KEY and the base URL it names replaced."""
    line = _sh_block(DOCS / "events.md", "curl").strip()
    assert "https://connect.example.com" in line
    line = line.replace("https://connect.example.com", make_run.url)
    env = {**os.environ, "KEY": make_run.key()}
    if not CURL:  # the same request with httpx: -N (no buffering) is what streaming reads do anyway
        words = shlex.split(_expand(line, env))
        assert words[:3] == ["curl", "-N", "-H"] and len(words) == 5, line
        name, value = words[3].split(": ", 1)
        with httpx.stream("GET", words[4], headers={name: value}, timeout=COMMAND_SECONDS) as response:
            assert next(response.iter_lines()) == ": connected"
        return
    process = subprocess.Popen(["bash", "-c", f"exec {line}"], env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True)
    first: list[str] = []
    reader = threading.Thread(target=lambda: first.append(process.stdout.readline()), daemon=True)
    reader.start()
    try:
        reader.join(timeout=COMMAND_SECONDS)
        assert first == [": connected\n"]
    finally:
        process.terminate()
        process.wait(timeout=30)


def test_transcript_export_curl_lines_answer(make_run):
    """docs/transcripts.md's curl lines with the reader's KEY, a session id from make run's
    transcript line as SESSION and the base URL it names replaced: each answers its format."""
    import io

    import srt as srt_reader
    import webvtt

    lines = _sh_lines(_sh_block(DOCS / "transcripts.md", "format=vtt"))
    transcript_line = make_run.curl_lines()[1]
    session = re.search(r"/sessions/([^/]+)/transcript", transcript_line).group(1)
    env = {**os.environ, "KEY": make_run.key(), "SESSION": session}
    vtt, srt, txt, final = (curl(line.replace("https://connect.example.com", make_run.url), env=env) for line in lines)
    assert [c.text for c in webvtt.from_buffer(io.StringIO(vtt))], vtt[:200]
    subtitles = list(srt_reader.parse(srt))
    assert subtitles and all(len(s.content.split(": ", 1)[-1]) <= 42 or " " not in s.content for s in subtitles)
    assert txt.strip() and "WEBVTT" not in txt and "-->" not in txt
    assert final.startswith("WEBVTT")


def test_python_sdk_snippet_lists_sessions(make_run):
    """docs/mcp.md's Python SDK block, with the key and the base URL replaced, run as a script."""
    out = StringIO()
    with redirect_stdout(out):
        docs.run_block(DOCS / "mcp.md", "python sdk", name="doc_mcp_sdk",
                       replace={"svc_…": make_run.key(), "https://connect.example.com": make_run.url})
    page = ast.literal_eval(out.getvalue())
    assert len(page["items"]) == 5 and page["nextCursor"]


def test_the_inspector_version_is_pinned_as_benchmarked():
    """docs/mcp.md names the Inspector version bench/mcp_conformance.sh runs (npx otherwise runs
    whatever it has cached; 0.15.0 failed against Connect)."""
    [benchmarked] = re.findall(r'INSPECTOR_VERSION="\$\{INSPECTOR_VERSION:-([0-9.]+)\}"',
                               (ROOT / "bench" / "mcp_conformance.sh").read_text())
    text = (DOCS / "mcp.md").read_text()
    named = re.findall(r"@modelcontextprotocol/inspector(@[0-9.]+)?", text)
    assert named and set(named) == {f"@{benchmarked}"}, named


def test_json_blocks_parse():
    parsed = [json.loads(b.text) for page in all_pages() for b in docs.blocks(page) if b.info == "json"]
    assert len(parsed) == 2
    filters, desktop = parsed
    assert [entry["type"] for entry in filters] == ["session.status_changed", "transcript.segment.created"]
    assert desktop["mcpServers"]["connect"]["command"] == "npx"


# --- the repository explains itself: docs/api/ and no pointer outside -------------------------

# What a pointer to text that is not in the repository looks like (the design notes and the
# specification the project was started from live outside it; docs/api/ says it in our words).
OUTSIDE = re.compile(r"\.\./shared|shared/spec|connect-service\.md|\bDESIGN\.md\b|\bcontract §", re.I)
MARKDOWN_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _tracked_text_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    files = []
    for name in listed.decode().split("\0"):
        path = ROOT / name
        if not name or not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            continue  # binary
        files.append(path)
    return files


def test_no_file_points_outside_the_repository():
    """No tracked text file names `../shared`, the specification or the design notes that sit
    beside the checkout (a clone has neither), and every relative Markdown link resolves to a
    file or folder inside the repository."""
    files = _tracked_text_files()
    assert len(files) > 200  # git listed the checkout
    this = Path(__file__).resolve()
    pointers, broken = [], []
    for path in files:
        text = path.read_text(errors="replace")
        if path != this:
            pointers += [f"{page_name(path)}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
                         for m in OUTSIDE.finditer(text)]
        if path.suffix == ".md":
            for target in MARKDOWN_LINK.findall(text):
                if re.match(r"[a-z][a-z0-9+.-]*:|#", target):
                    continue  # a URL or an anchor on the same page
                resolved = (path.parent / target.split("#")[0]).resolve()
                if not resolved.is_relative_to(ROOT) or not resolved.exists():
                    broken.append(f"{page_name(path)}: {target}")
    assert pointers == [], "pointers to text outside the repository: say it in docs/api/ and point there"
    assert broken == [], "Markdown links outside the repository or to nothing"


# Addresses a page may show: this machine, the reserved example domains, and templates.
LOCAL_ADDRESS = re.compile(r"https?://(127\.0\.0\.1|localhost|\[::1\]|[\w.-]*\.(invalid|test|example)\b|"
                           r"(www\.)?example\.(com|org|net)\b|\{|<|your-|connect\.)")


def test_no_page_links_to_the_web():
    """The pages explain themselves: a source they rely on is named (a project, its repository,
    a section), never linked, so nothing a reader needs lies behind an address outside the
    repository. Addresses of this machine and example hosts are not links."""
    found = []
    for page in all_pages():
        text = page.read_text()
        for m in re.finditer(r"https?://[^\s)`>\"']+", text):
            if not LOCAL_ADDRESS.match(m.group(0)):
                found.append(f"{page_name(page)}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}")
    assert found == []


def _operations_in_openapi(document: dict) -> list[str]:
    methods = {"get", "put", "post", "patch", "delete", "head", "options"}
    return [f"{method.upper()} {path}" for path, item in document["paths"].items() for method in item
            if method in methods]


def test_every_openapi_operation_is_named_in_the_api_reference(client):
    """Each method and path /openapi.json lists appears, as `METHOD /path`, on a docs/api/ page."""
    response = client.get("/openapi.json")
    assert response.status_code == 200
    test_only = set(re.findall(r'path\("([^"]+)"', (ROOT / "tests" / "urls.py").read_text()))
    operations = [op for op in _operations_in_openapi(response.json()) if op.split(" /", 1)[1] not in test_only]
    assert len(operations) > 30
    reference = "\n".join(page.read_text() for page in sorted((DOCS / "api").glob("*.md")))
    assert [op for op in operations if f"{op}`" not in reference and f"{op}\n" not in reference] == []
    assert (DOCS / "api" / "README.md") in all_pages()  # docs/api/ is under every docs check too


def test_the_worked_webhook_verification_runs_and_its_values_are_connects():
    """docs/api/webhooks.md's example, as written: it verifies, and refuses a tampered body. Its
    header is what Connect's signing code gives for the example's body with the example key."""
    from apps.webhooks import signing

    out = StringIO()
    with redirect_stdout(out):
        example = docs.run_block(DOCS / "api" / "webhooks.md", "python verify-example", name="doc_verify_example")
    assert out.getvalue().splitlines() == [
        "verified evt_01kbq5h2m9a1b2c3d4e5f6g7h8 session.created",
        "tampered body refused: no signature verifies",
    ]
    seed = hashlib.sha256(b"docs/api/webhooks.md example key").digest()
    [key] = example.JWKS["keys"]
    assert key == signing.jwk(key["kid"], signing.public_key_of(seed))
    parsed = signing.parse_signature_header(example.HEADER)
    assert example.HEADER == signing.sign(seed, kid=key["kid"], timestamp=parsed.timestamp, body=example.BODY)
    json.loads(example.BODY)  # a body Connect could have sent: JSON, the webhook body's fields
    assert set(json.loads(example.BODY)) == {"id", "type", "occurredAt", "data"}


# --- README's configuration table ------------------------------------------------------------


def _environment_reads(module: Path, seen: set[Path]) -> set[str]:
    """Names a module reads from the environment — `env("X")`, `envint("X", …)`,
    `envbool("X")`, `os.environ.get("X")`, `os.environ["X"]`, `os.getenv("X")` — and those the
    repository's modules it imports at module level read, transitively."""
    if module in seen or not module.exists():
        return set()
    seen.add(module)
    tree = ast.parse(module.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) \
                and isinstance(node.args[0].value, str):
            func = node.func
            called = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            target = ast.unparse(func)
            if called in {"env", "envint", "envbool", "getenv"} or target in {"os.environ.get", "environ.get"}:
                names.add(node.args[0].value)
        elif isinstance(node, ast.Subscript) and ast.unparse(node.value) in {"os.environ", "environ"} \
                and isinstance(node.slice, ast.Constant):
            names.add(node.slice.value)
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for name in modules:
                if name.split(".")[0] in {"apps", "connect", "engine"}:
                    base = ROOT.joinpath(*name.split("."))
                    names |= _environment_reads(base.with_suffix(".py"), seen)
                    names |= _environment_reads(base / "__init__.py", seen)
    return names


def _configuration_table() -> set[str]:
    text = README.read_text()
    section = text[text.index("\n## Configuration\n"):]
    section = section[:section.index("\n## ", 1)]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return {name for row in rows for name in re.findall(r"`([A-Z][A-Z0-9_]+)`", row.split(" | ")[0])}


def test_readme_configuration_table_lists_every_variable_the_settings_read():
    read = _environment_reads(ROOT / "connect" / "settings.py", set())
    assert {"SECRET_KEY", "DATABASE_URL", "CONNECT_BASE_URL", "CONNECT_METRICS_TOKEN", "LOG_LEVEL"} <= read
    table = _configuration_table()
    assert sorted(read - table) == [], "read by the settings, missing from README's configuration table"
    assert sorted(table - read) == [], "in README's configuration table, read by no setting"


# --- docs/oauth.md against make run, this test acting as the member's browser -----------------

OAUTH = DOCS / "oauth.md"


def _browser_signs_in_and_consents(authorize_url: str, base_url: str) -> str:
    """What the member does in a browser: open the authorization URL, sign in as make run's demo
    member, choose the workspace, approve. Returns where the browser is sent back to."""
    from tests.oauth.flow import Browser, form_fields, query_of

    with httpx.Client(base_url=base_url, timeout=30) as http:
        browser = Browser(http)
        to_login = http.get(authorize_url)
        assert to_login.status_code == 302 and "/accounts/login" in to_login.headers["location"], to_login.text[:300]
        browser.login("demo@example.com", "demo-password", next_url=query_of(to_login.headers["location"])["next"])
        page = http.get(authorize_url)
        assert page.status_code == 200, page.text[:300]
        workspaces = form_fields(page.text).radios.get("workspace")
        done = browser.consent(page, workspace_id=workspaces[0] if workspaces else None)
        assert done.status_code == 302, done.text[:300]
        return done.headers["location"]


def test_oauth_page_web_app_signs_in_and_reads(make_run):
    """docs/oauth.md's web app: the operator's registration line as written, the app with the id
    and secret it printed, make run's URL and a free port; a member signs in through it and sees
    their sessions."""
    from http.server import HTTPServer

    registered = run_line(_sh_block(OAUTH, "create_oauth_client").strip(), make_run.env)
    client_id, client_secret = registered.split()
    port = free_port()
    app = docs.run_block(OAUTH, "python oauth-web-app", name="doc_oauth_web_app", replace={
        'CLIENT_ID = "…"': f'CLIENT_ID = "{client_id}"', 'CLIENT_SECRET = "…"': f'CLIENT_SECRET = "{client_secret}"',
        "http://127.0.0.1:8000": make_run.url, "PORT = 9100": f"PORT = {port}"})
    server = HTTPServer(("127.0.0.1", port), app.App)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        start = httpx.get(f"http://127.0.0.1:{port}/", timeout=30)
        assert start.status_code == 302 and start.headers["location"].startswith(f"{make_run.url}/api/auth/oauth2/authorize?")
        callback = _browser_signs_in_and_consents(start.headers["location"], make_run.url)
        assert callback.startswith(f"http://127.0.0.1:{port}/callback?")
        shown = httpx.get(callback, timeout=60)
        assert shown.status_code == 200, shown.text
        assert "Your newest sessions" in shown.text and shown.text.count("<li>") == 3
        assert httpx.get(callback, timeout=30).status_code == 400  # a state is used once
    finally:
        server.shutdown()
        server.server_close()


def test_oauth_page_command_line_tool_signs_in_refreshes_and_reads(make_run):
    """docs/oauth.md's command-line tool with make run's URL: it registers, opens the browser on
    the authorization URL (here: this test signs in and consents), catches the redirect on its
    own loopback port, exchanges, refreshes and lists three sessions."""
    tool = docs.run_block(OAUTH, "python oauth-cli", name="doc_oauth_cli", replace={"http://127.0.0.1:8000": make_run.url})
    browsed: list[BaseException] = []

    def browser(url: str) -> bool:
        def member() -> None:
            try:
                callback = _browser_signs_in_and_consents(url, make_run.url)
                assert httpx.get(callback, timeout=30).text == "Signed in: you can close this tab."
            except BaseException as failure:  # noqa: BLE001 - reported on the test's thread
                browsed.append(failure)
                httpx.get(re.search(r"redirect_uri=([^&]+)", url).group(1).replace("%3A", ":").replace("%2F", "/")
                          + "?error=browser_failed", timeout=30)
        threading.Thread(target=member, daemon=True).start()
        return True

    out = StringIO()
    with redirect_stdout(out):
        try:
            tool.main(open_browser=browser)
        except SystemExit:
            pass
    assert browsed == [], browsed
    lines = out.getvalue().splitlines()
    assert lines[0].startswith(f"Sign in at: {make_run.url}/api/auth/oauth2/authorize?")
    assert lines[1] == "token expires in 3600 s; scope: svc:sessions:read"
    assert len(lines[2:]) == 3 and all(line.split()[1] in {"recording", "processing", "completed", "failed"}
                                        for line in lines[2:])


def test_make_test_reports_why_tests_were_skipped():
    """`make test` (README: the command stays as it is) prints each skip's reason in its summary."""
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile[makefile.index("\ntest: "):].split("\n\n")[0]
    [pytest_line] = [line for line in recipe.splitlines() if "-m pytest" in line]
    assert any(word.startswith("-r") and "s" in word for word in pytest_line.split()), pytest_line
