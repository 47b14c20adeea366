"""`issue_api_key SLUG --member EMAIL --scopes a,b,c [--name N] [--replace]`: prints the new
`svc_` key.

The key is shown this once: only its hash is stored. `--replace` first revokes the member's
live keys of the same name in the workspace (`make run` uses it, so repeated runs leave one
demo key, not one more each time)."""

from __future__ import annotations

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from apps.tenancy import services
from apps.tenancy.management.lookups import membership_by_email, workspace_by_slug


class Command(BaseCommand):
    help = (
        "Issue an API key on behalf of a member. Prints the key on the last line; it is not "
        "stored and cannot be shown again. Scopes: " + ", ".join(settings.CONNECT_SCOPES)
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--member", required=True, metavar="EMAIL", help="the issuing member")
        parser.add_argument("--scopes", required=True, help="comma-separated scopes")
        parser.add_argument("--name", default="API key", help="a label to recognise the key by")
        parser.add_argument("--replace", action="store_true",
                            help="revoke the member's live keys of the same name in the workspace first")

    def handle(self, *args, slug: str, member: str, scopes: str, name: str, replace: bool = False,
               **options) -> None:
        workspace = workspace_by_slug(slug)
        membership = membership_by_email(workspace, member)
        if not membership.is_active:
            # The key would only ever answer 403: refuse rather than hand out a dead credential.
            raise CommandError(f"{member} is deactivated in {slug}; run add_member to re-activate")
        try:
            issued = services.issue_api_key(membership=membership, scopes=scopes.split(","), name=name,
                                            replace=replace)
        except services.UnknownScope as exc:
            raise CommandError(f"{exc} (known: {', '.join(settings.CONNECT_SCOPES)})") from None
        if not workspace.is_available:
            self.stderr.write(f"warning: workspace {slug} is suspended; the key answers 404 until it is unsuspended")
        self.stdout.write(issued.key)
