"""`add_member SLUG EMAIL [--password PW] [--staff]`: prints the member's email."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.core.validators import validate_email

from apps.tenancy import services
from apps.tenancy.management.lookups import workspace_by_slug


class Command(BaseCommand):
    help = (
        "Create the user if needed and make them an active member of the workspace (re-activating "
        "a deactivated member). --staff also lets them into the admin. Prints the email."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("slug")
        parser.add_argument("email")
        parser.add_argument("--password", help="set (or reset) the user's password")
        parser.add_argument("--staff", action="store_true", help="give admin (staff) access")

    def handle(self, *args, slug: str, email: str, password: str | None, staff: bool, **options) -> None:
        try:
            validate_email(email)
        except ValidationError:
            raise CommandError(f"invalid email: {email!r}") from None
        workspace = workspace_by_slug(slug)
        membership = services.add_member(workspace=workspace, email=email, password=password, staff=staff)
        self.stdout.write(membership.user.email)
