"""`issue_api_key SLUG --member EMAIL --scopes a,b,c [--name N] [--replace] [--keep-in FILE
[--reissue]]`: prints the `svc_` key on its last line.

The service stores only a key's hash. `--replace` first revokes the member's live keys of the
same name in the workspace, one save each, so whatever listens for a revocation hears it (a
webhook endpoint installed with the key turns inactive, `installation_unauthorized`); each
revoked key is named on stderr. `--keep-in FILE` (`make run`: var/demo-keys.json) keeps the key
in FILE, per database, and prints it again while it still holds with the same member, name and
scopes, so repeated runs keep one demo key and the webhooks made with it; `--reissue` issues a
new one anyway. FILE is the checkout's, readable by its owner only."""

from __future__ import annotations

import json
import os
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.db import connection, transaction
from django.utils import timezone

from apps.tenancy import services
from apps.tenancy.management.lookups import membership_by_email, workspace_by_slug
from apps.tenancy.models import ApiKey, hash_api_key


def _database() -> str:
    """Which database a kept key belongs to: a test's scratch database never reuses, nor
    overwrites, the key of the checkout's own."""
    db = connection.settings_dict
    return f"{connection.vendor}://{db.get('HOST') or ''}:{db.get('PORT') or ''}/{db.get('NAME')}"


def _read(path: Path) -> dict[str, str]:
    try:
        kept = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return kept if isinstance(kept, dict) else {}


def _write(path: Path, kept: dict[str, str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as out:
        json.dump(kept, out, indent=1)
    os.chmod(path, 0o600)


class Command(BaseCommand):
    help = (
        "Issue an API key on behalf of a member. Prints the key on the last line; the service "
        "stores only its hash and cannot show it again. Scopes: " + ", ".join(settings.CONNECT_SCOPES)
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--member", required=True, metavar="EMAIL", help="the issuing member")
        parser.add_argument("--scopes", required=True, help="comma-separated scopes")
        parser.add_argument("--name", default="API key", help="a label to recognise the key by")
        parser.add_argument("--replace", action="store_true",
                            help="revoke the member's live keys of the same name in the workspace first")
        parser.add_argument("--keep-in", metavar="FILE",
                            help="print the key kept in FILE again while it holds; keep a new key there")
        parser.add_argument("--reissue", action="store_true", help="with --keep-in: issue a new key anyway")

    def handle(self, *args, slug: str, member: str, scopes: str, name: str, replace: bool = False,
               keep_in: str | None = None, reissue: bool = False, **options) -> None:
        workspace = workspace_by_slug(slug)
        membership = membership_by_email(workspace, member)
        if not membership.is_active:
            # The key would only ever answer 403: refuse rather than hand out a dead credential.
            raise CommandError(f"{member} is deactivated in {slug}; run add_member to re-activate")
        try:
            wanted = services.validate_scopes(scopes.split(","))  # before anything is revoked
        except services.UnknownScope as exc:
            raise CommandError(f"{exc} (known: {', '.join(settings.CONNECT_SCOPES)})") from None
        path = Path(keep_in) if keep_in else None
        kept = _read(path) if path else {}
        if path and not reissue and self._holds(kept.get(_database()), membership, name, wanted):
            self.stderr.write(f"kept API key ({path}): webhook endpoints made with it keep delivering")
            self.stdout.write(kept[_database()])
            return
        with transaction.atomic():
            if replace:
                self._revoke(membership, name)
            issued = services.issue_api_key(membership=membership, scopes=wanted, name=name)
        if not workspace.is_available:
            self.stderr.write(f"warning: workspace {slug} is suspended; the key answers 404 until it is unsuspended")
        if path:
            _write(path, {**kept, _database(): issued.key})
            self.stderr.write(f"new API key, kept in {path} for the next run")
        self.stdout.write(issued.key)

    @staticmethod
    def _holds(key: str | None, membership, name: str, scopes: list[str]) -> bool:
        if not key:
            return False
        found = ApiKey.objects.filter(key_hash=hash_api_key(key), issued_by=membership, name=name,
                                      revoked_at__isnull=True).first()
        return found is not None and (found.expires_at is None or found.expires_at > timezone.now()) \
            and sorted(found.scopes) == sorted(scopes)

    def _revoke(self, membership, name: str) -> None:
        for api_key in ApiKey.objects.filter(issued_by=membership, name=name, revoked_at__isnull=True):
            services.revoke_api_key(api_key=api_key)
            self.stderr.write(
                f"revoked API key {api_key.prefix}… ({name!r}, issued {api_key.created_at:%Y-%m-%d %H:%M} UTC): "
                "webhook endpoints made with it are now inactive (disabledReason installation_unauthorized); "
                "PATCH each with {\"active\": true} and the new key to resume them (docs/webhooks.md)"
            )
