"""`deactivate_member SLUG EMAIL`: prints the member's email."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from apps.tenancy import services
from apps.tenancy.management.lookups import membership_by_email, workspace_by_slug


class Command(BaseCommand):
    help = (
        "Deactivate a member: their API keys and OAuth grants answer 403 forbidden from now on. "
        "Idempotent. Prints the email; add_member re-activates."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("slug")
        parser.add_argument("email")

    def handle(self, *args, slug: str, email: str, **options) -> None:
        membership = membership_by_email(workspace_by_slug(slug), email)
        services.deactivate_member(membership=membership)
        self.stdout.write(membership.user.email)
