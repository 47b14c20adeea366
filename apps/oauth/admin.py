"""DOT registers admin pages for the swapped models; these replace them to show the
workspace (listed and filterable) and to revoke a member's tokens in one action."""

from __future__ import annotations

from django.contrib import admin
from django.utils.translation import ngettext
from oauth2_provider import admin as dot_admin  # registers DOT's pages first

from apps.oauth import services
from apps.oauth.models import AccessToken, Grant, RefreshToken


def _replace(model, admin_class) -> None:
    if admin.site.is_registered(model):
        admin.site.unregister(model)
    admin.site.register(model, admin_class)


class AccessTokenAdmin(dot_admin.AccessTokenAdmin):
    list_display = ("pk", "user", "workspace", "application", "scope", "resource", "expires")
    list_select_related = ("application", "user", "workspace")
    list_filter = ("workspace", "application")
    search_fields = dot_admin.AccessTokenAdmin.search_fields + ("workspace__slug",)
    raw_id_fields = ("user", "source_refresh_token", "workspace", "id_token")
    actions = ("revoke_tokens",)

    @admin.action(description="Revoke selected tokens")
    def revoke_tokens(self, request, queryset):
        revoked = services.revoke_access_tokens(queryset)
        self.message_user(request, ngettext("Revoked %d token.", "Revoked %d tokens.", revoked) % revoked)


class RefreshTokenAdmin(dot_admin.RefreshTokenAdmin):
    list_display = ("pk", "user", "workspace", "application", "created", "revoked")
    list_select_related = ("application", "user", "workspace")
    list_filter = ("workspace", "application", ("revoked", admin.EmptyFieldListFilter))
    search_fields = dot_admin.RefreshTokenAdmin.search_fields + ("workspace__slug",)
    raw_id_fields = ("user", "access_token", "workspace")
    actions = ("revoke_tokens",)

    @admin.action(description="Revoke selected tokens")
    def revoke_tokens(self, request, queryset):
        revoked = services.revoke_refresh_tokens(queryset)
        self.message_user(request, ngettext("Revoked %d token.", "Revoked %d tokens.", revoked) % revoked)


class GrantAdmin(dot_admin.GrantAdmin):
    list_display = ("pk", "user", "workspace", "application", "expires")
    list_select_related = ("application", "user", "workspace")
    list_filter = ("workspace", "application")
    raw_id_fields = ("user", "workspace")


_replace(AccessToken, AccessTokenAdmin)
_replace(RefreshToken, RefreshTokenAdmin)
_replace(Grant, GrantAdmin)
