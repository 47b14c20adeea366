"""Static files: hashed, compressed copies made by `collectstatic`, served by ServeStatic.

`collectstatic` (make run, the documented production start) writes each file under a name
with its content hash plus gzip copies, and a manifest. Templates ask the storage for a
file's URL; when no `collectstatic` has run (the test client, a checkout that never ran the
server) the manifest is empty and URLs fall back to the plain names instead of failing the
page with an error: the page renders, unstyled, and the browser tests (which collect first)
are what prove the styled pages.
"""

from __future__ import annotations

import re

from servestatic.storage import CompressedManifestStaticFilesStorage

# Django's ManifestStaticFilesStorage names: `name.<12 hex digits>.ext`.
HASHED_NAME = re.compile(r"\.[0-9a-f]{12}\.[^./]+$")


def is_hashed(path: str, url: str) -> bool:  # noqa: ARG001 - ServeStatic's signature
    """ServeStatic's `immutable_file_test`: hashed names never change, so they are cached for
    a year (`immutable`); anything else gets the short default max-age."""
    return bool(HASHED_NAME.search(url))


class HashedStaticStorage(CompressedManifestStaticFilesStorage):
    manifest_strict = False

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.manifest_strict = False  # the parent reads a setting; this storage never is strict

    def stored_name(self, name: str) -> str:
        try:
            return super().stored_name(name)
        except ValueError:  # not collected: the plain name (see the module docstring)
            return name
