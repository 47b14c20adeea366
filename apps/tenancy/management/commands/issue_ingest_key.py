"""`issue_ingest_key SLUG [--name N] [--member EMAIL] [--replace]`: prints a new ingest key.

An ingest key (`svc_`, scope `svc:ingest:write` only) feeds the ingest API and reads nothing.
Like every key it is issued on behalf of a member (deactivating the member turns it into
`403 forbidden`): `--member`, or else the workspace's longest-standing active member."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from apps.tenancy import services
from apps.tenancy.management.lookups import membership_by_email, workspace_by_slug
from apps.tenancy.models import Membership


class Command(BaseCommand):
    help = (
        "Issue an ingest key (scope svc:ingest:write only; it reads nothing). Prints the key on the "
        "last line; it is not stored and cannot be shown again."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--name", default="Ingest key", help="a label to recognise the key by")
        parser.add_argument("--member", metavar="EMAIL", help="the issuing member (default: the oldest active one)")
        parser.add_argument("--replace", action="store_true",
                            help="revoke the issuer's live keys of the same name in the workspace first")

    def handle(self, *args, slug: str, name: str, member: str | None = None, replace: bool = False,
               **options) -> None:
        workspace = workspace_by_slug(slug)
        if member is not None:
            membership = membership_by_email(workspace, member)
            if not membership.is_active:
                raise CommandError(f"{member} is deactivated in {slug}; run add_member to re-activate")
        else:
            membership = (
                Membership.objects.filter(workspace=workspace, is_active=True, user__is_active=True)
                .order_by("created_at", "pk")
                .first()
            )
            if membership is None:
                raise CommandError(f"{slug} has no active member to issue the key; run add_member first")
        issued = services.issue_ingest_key(membership=membership, name=name, replace=replace)
        if not workspace.is_available:
            self.stderr.write(f"warning: workspace {slug} is suspended; the key answers 404 until it is unsuspended")
        self.stdout.write(issued.key)
