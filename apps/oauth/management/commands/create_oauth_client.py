"""`create_oauth_client NAME --redirect-uri URI [--confidential]` (README.md, Operator commands).

Prints the client id, or `id secret` for a confidential client, on the last line of stdout.
"""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from apps.oauth import services


class Command(BaseCommand):
    help = "Register an OAuth client (authorization code + PKCE)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("name")
        parser.add_argument("--redirect-uri", required=True, action="append", dest="redirect_uris")
        parser.add_argument("--confidential", action="store_true", help="issue a client secret")

    def handle(self, *args, name: str, redirect_uris: list[str], confidential: bool, **options) -> None:
        try:
            created = services.create_client(
                name=name, redirect_uri=" ".join(redirect_uris), confidential=confidential
            )
        except ValidationError as exc:
            raise CommandError("; ".join(f"{field}: {' '.join(msgs)}" for field, msgs in exc.message_dict.items()))
        client_id = created.application.client_id
        self.stdout.write(f"{client_id} {created.client_secret}" if confidential else client_id)
