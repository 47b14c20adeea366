"""`revoke_api_key KEY_OR_ID`: prints the revoked key's id."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from apps.tenancy import services
from apps.tenancy.models import API_KEY_PREFIX, ApiKey, hash_api_key


class Command(BaseCommand):
    help = (
        "Revoke an API key, given the full key (svc_…) or its id. The key answers 401 from now "
        "on. Idempotent. Prints the key's id."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("key_or_id", metavar="KEY_OR_ID")

    def handle(self, *args, key_or_id: str, **options) -> None:
        key_or_id = key_or_id.strip()
        if key_or_id.startswith(API_KEY_PREFIX):
            api_key = ApiKey.objects.filter(key_hash=hash_api_key(key_or_id)).first()
        else:
            api_key = ApiKey.objects.filter(pk=key_or_id).first()
        if api_key is None:
            raise CommandError("no such API key")  # never echo a key back
        services.revoke_api_key(api_key=api_key)
        self.stdout.write(api_key.id)
