"""`create_workspace SLUG [--name NAME]`: prints the new workspace's slug (the name every other
command takes)."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.core.validators import validate_slug

from apps.tenancy import services
from apps.tenancy.models import Workspace


class Command(BaseCommand):
    help = "Create a workspace. Prints its slug on the last line; fails if the slug is taken."

    def add_arguments(self, parser) -> None:
        parser.add_argument("slug")
        parser.add_argument("--name", help="display name (default: the slug)")

    def handle(self, *args, slug: str, name: str | None, **options) -> None:
        try:
            validate_slug(slug)
        except ValidationError:
            raise CommandError(f"invalid slug: {slug!r} (letters, digits, - and _ only)") from None
        if len(slug) > Workspace._meta.get_field("slug").max_length:
            raise CommandError(f"invalid slug: {slug!r} is too long")
        if Workspace.objects.filter(slug=slug).exists():
            raise CommandError(f"workspace {slug} already exists")
        workspace = services.create_workspace(slug=slug, name=name)
        self.stdout.write(workspace.slug)
