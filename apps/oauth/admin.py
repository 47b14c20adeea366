"""DOT registers admin pages for the swapped models; these replace them to show the
workspace (listed and filterable) and to revoke a member's tokens in one action.

ID tokens are not in the back office: OIDC is off, so none is ever issued (the model exists
only because DOT's access token points at it)."""

from __future__ import annotations

from django.contrib import admin
from django.utils.translation import ngettext
from oauth2_provider import admin as dot_admin  # registers DOT's pages first

from apps.core.admin import clipped, short_time
from apps.oauth import services
from apps.oauth.models import AccessToken, Grant, IDToken, RefreshToken


def _replace(model, admin_class) -> None:
    if admin.site.is_registered(model):
        admin.site.unregister(model)
    admin.site.register(model, admin_class)


class MemberColumns:
    """The columns every token list shares, narrow enough for 1024 px beside the filters."""

    @admin.display(description="member", ordering="user__email")
    def member(self, obj) -> str:
        user = obj.user
        return clipped(user and (user.email or user.username))

    @admin.display(description="client", ordering="application__name")
    def client(self, obj) -> str:
        return clipped(obj.application and obj.application.name)


class AccessTokenAdmin(MemberColumns, dot_admin.AccessTokenAdmin):
    list_display = ("member", "workspace", "client", "scopes", "expires_at")
    list_display_links = ("member",)
    list_select_related = ("application", "user", "workspace")
    list_filter = ("workspace", "application")
    search_fields = dot_admin.AccessTokenAdmin.search_fields + ("workspace__slug",)
    raw_id_fields = ("user", "source_refresh_token", "workspace", "id_token")
    actions = ("revoke_tokens",)

    @admin.display(description="scopes", ordering="scope")
    def scopes(self, obj: AccessToken) -> str:
        return clipped(obj.scope, width="narrow")

    @admin.display(description="expires", ordering="expires")
    def expires_at(self, obj: AccessToken) -> str:
        return short_time(obj.expires)

    @admin.action(description="Revoke selected tokens")
    def revoke_tokens(self, request, queryset):
        revoked = services.revoke_access_tokens(queryset)
        self.message_user(request, ngettext("Revoked %d token.", "Revoked %d tokens.", revoked) % revoked)


class RefreshTokenAdmin(MemberColumns, dot_admin.RefreshTokenAdmin):
    list_display = ("member", "workspace", "client", "created_at", "revoked_at")
    list_display_links = ("member",)
    list_select_related = ("application", "user", "workspace")
    list_filter = ("workspace", "application", ("revoked", admin.EmptyFieldListFilter))
    search_fields = dot_admin.RefreshTokenAdmin.search_fields + ("workspace__slug",)
    raw_id_fields = ("user", "access_token", "workspace")
    actions = ("revoke_tokens",)

    @admin.display(description="created", ordering="created")
    def created_at(self, obj: RefreshToken) -> str:
        return short_time(obj.created)

    @admin.display(description="revoked", ordering="revoked")
    def revoked_at(self, obj: RefreshToken) -> str:
        return short_time(obj.revoked)

    @admin.action(description="Revoke selected tokens")
    def revoke_tokens(self, request, queryset):
        revoked = services.revoke_refresh_tokens(queryset)
        self.message_user(request, ngettext("Revoked %d token.", "Revoked %d tokens.", revoked) % revoked)


class GrantAdmin(MemberColumns, dot_admin.GrantAdmin):
    list_display = ("member", "workspace", "client", "expires_at")
    list_display_links = ("member",)
    list_select_related = ("application", "user", "workspace")
    list_filter = ("workspace", "application")
    raw_id_fields = ("user", "workspace")

    @admin.display(description="expires", ordering="expires")
    def expires_at(self, obj: Grant) -> str:
        return short_time(obj.expires)


_replace(AccessToken, AccessTokenAdmin)
_replace(RefreshToken, RefreshTokenAdmin)
_replace(Grant, GrantAdmin)
if admin.site.is_registered(IDToken):
    admin.site.unregister(IDToken)
