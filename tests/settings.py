"""Test settings: production settings, with a fast password hasher (tests create many users
and PBKDF2's deliberate slowness would dominate the suite). The live daphne that end-to-end
tests start uses this module too, so both sides hash alike."""

import os

os.environ.setdefault("CONNECT_DEVELOPMENT", "1")

from connect.settings import *  # noqa: E402,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

if DATABASES["default"]["ENGINE"].endswith("sqlite3"):  # noqa: F405
    # A file, not memory, so the live daphne that end-to-end tests start sees the same rows;
    # named per process so two test runs in one checkout never share it.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / f"test-connect-{os.getpid()}.sqlite3")}  # noqa: F405
else:
    # Per process on PostgreSQL too: two test runs on one server (two checkouts, CI beside a
    # developer) must never create, use or drop each other's database.
    DATABASES["default"]["TEST"] = {"NAME": f"test_{DATABASES['default']['NAME']}_{os.getpid()}"}  # noqa: F405

ROOT_URLCONF = "tests.urls"
ASGI_APPLICATION = "tests.asgi.application"
