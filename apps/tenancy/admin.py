"""Back office for tenancy. Every change goes through `apps.tenancy.services`, like the commands.

Members sign in with their email (it is their username: `add_member`), so the admin's login
form says Email, and the users' list leads with it.

API keys are issued here with a form that calls `issue_api_key` and renders the plain key once,
in the response to the POST: it is never stored, put in a message or a session, nor shown again.
"""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth import get_user_model
from django.contrib.auth.admin import UserAdmin
from django.db.models import QuerySet
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.html import format_html

from apps.core.admin import clipped, short_time
from apps.tenancy import services
from apps.tenancy.models import INGEST_SCOPE, ApiKey, Membership, Workspace


class EmailLoginForm(AdminAuthenticationForm):
    """Django's admin login form, its username field named for what members type."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["username"].label = "Email"
        self.fields["username"].widget.attrs.update({"inputmode": "email", "autocomplete": "username"})


admin.site.login_form = EmailLoginForm

User = get_user_model()


class MemberUserAdmin(UserAdmin):
    list_display = ["email_or_username", "is_staff", "is_active", "last_login_at"]
    list_filter = ["is_staff", "is_active"]

    @admin.display(description="email", ordering="email")
    def email_or_username(self, obj) -> str:
        return clipped(obj.email or obj.username, width="wide")

    @admin.display(description="last login", ordering="last_login")
    def last_login_at(self, obj) -> str:
        return short_time(obj.last_login)


if admin.site.is_registered(User):
    admin.site.unregister(User)
admin.site.register(User, MemberUserAdmin)


@admin.register(Workspace)
class WorkspaceAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "available", "suspended", "created"]
    list_filter = [("suspended_at", admin.EmptyFieldListFilter)]
    search_fields = ["slug", "name"]
    readonly_fields = ["id", "suspended_at", "created_at"]
    actions = ["suspend", "unsuspend"]

    def get_readonly_fields(self, request, obj=None):
        # Slugs appear in scripts and URLs: fixed once created.
        return self.readonly_fields + (["slug"] if obj else [])

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # suspend instead: deleting would cascade to every row of the tenant

    @admin.display(boolean=True, description="available")
    def available(self, obj: Workspace) -> bool:
        return obj.is_available

    @admin.display(description="suspended", ordering="suspended_at")
    def suspended(self, obj: Workspace) -> str:
        return short_time(obj.suspended_at)

    @admin.display(description="created", ordering="created_at")
    def created(self, obj: Workspace) -> str:
        return short_time(obj.created_at)

    @admin.action(description="Suspend selected workspaces (their credentials answer 404)")
    def suspend(self, request: HttpRequest, queryset: QuerySet[Workspace]) -> None:
        for workspace in queryset:
            services.suspend_workspace(workspace=workspace)
        self.message_user(request, f"Suspended {len(queryset)} workspace(s).", messages.SUCCESS)

    @admin.action(description="Unsuspend selected workspaces")
    def unsuspend(self, request: HttpRequest, queryset: QuerySet[Workspace]) -> None:
        for workspace in queryset:
            services.unsuspend_workspace(workspace=workspace)
        self.message_user(request, f"Unsuspended {len(queryset)} workspace(s).", messages.SUCCESS)


class AddMemberForm(forms.ModelForm):
    """Adds by email, like the `add_member` command: the user is created if needed."""

    email = forms.EmailField()
    password = forms.CharField(required=False, widget=forms.PasswordInput, help_text="set or reset the password")
    staff = forms.BooleanField(required=False, help_text="may use this admin")

    class Meta:
        model = Membership
        fields = ["workspace"]


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user_email", "workspace", "is_active", "created", "deactivated"]
    list_filter = ["is_active", "workspace"]
    list_select_related = ["user", "workspace"]
    search_fields = ["user__email", "user__username", "workspace__slug"]
    readonly_fields = ["workspace", "user", "is_active", "created_at", "deactivated_at"]
    actions = ["activate", "deactivate"]

    def get_form(self, request, obj=None, change=False, **kwargs):
        if obj is None:
            kwargs["form"] = AddMemberForm
        return super().get_form(request, obj, change=change, **kwargs)

    def get_fields(self, request, obj=None):
        return ["workspace", "email", "password", "staff"] if obj is None else self.readonly_fields

    def get_readonly_fields(self, request, obj=None):
        return [] if obj is None else self.readonly_fields

    def save_model(self, request, obj: Membership, form, change: bool) -> None:
        if change:
            return  # nothing is editable: activation goes through the actions
        membership = services.add_member(
            workspace=form.cleaned_data["workspace"],
            email=form.cleaned_data["email"],
            password=form.cleaned_data["password"] or None,
            staff=form.cleaned_data["staff"],
        )
        # The admin carries on with `obj` (log entry, redirect): make it the saved row.
        obj.pk = membership.pk
        obj.user = membership.user
        obj._state.adding = False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # deactivate instead: the member's keys then answer 403, not 401

    @admin.display(description="member", ordering="user__email")
    def user_email(self, obj: Membership) -> str:
        return clipped(obj.user.email or obj.user.username, width="wide")

    @admin.display(description="created", ordering="created_at")
    def created(self, obj: Membership) -> str:
        return short_time(obj.created_at)

    @admin.display(description="deactivated", ordering="deactivated_at")
    def deactivated(self, obj: Membership) -> str:
        return short_time(obj.deactivated_at)

    @admin.action(description="Activate selected members")
    def activate(self, request: HttpRequest, queryset: QuerySet[Membership]) -> None:
        for membership in queryset:
            services.activate_member(membership=membership)
        self.message_user(request, f"Activated {len(queryset)} member(s).", messages.SUCCESS)

    @admin.action(description="Deactivate selected members (their keys and grants answer 403)")
    def deactivate(self, request: HttpRequest, queryset: QuerySet[Membership]) -> None:
        for membership in queryset:
            services.deactivate_member(membership=membership)
        self.message_user(request, f"Deactivated {len(queryset)} member(s).", messages.SUCCESS)


class IssueApiKeyForm(forms.ModelForm):
    issued_by = forms.ModelChoiceField(
        queryset=Membership.objects.filter(is_active=True).select_related("user", "workspace"),
        label="Issued by",
        help_text="an active member; the key reads that member's workspace",
    )
    scopes = forms.MultipleChoiceField(
        choices=[
            *((scope, f"{scope} — {text}") for scope, text in settings.CONNECT_SCOPES.items()),
            (INGEST_SCOPE, f"{INGEST_SCOPE} — an ingest key: writes through the ingest API, reads nothing; "
                           "given alone"),
        ],
        widget=forms.CheckboxSelectMultiple,
    )

    class Meta:
        model = ApiKey
        fields = ["issued_by", "name", "scopes"]

    def clean_scopes(self) -> list[str]:
        try:
            return services.validate_scopes(self.cleaned_data["scopes"])
        except services.UnknownScope as exc:
            raise forms.ValidationError(str(exc)) from None


class ApiKeyStateFilter(admin.SimpleListFilter):
    title = "state"
    parameter_name = "state"

    def lookups(self, request, model_admin):
        return [("active", "active"), ("revoked", "revoked")]

    def queryset(self, request, queryset):
        if self.value() == "active":
            return queryset.filter(revoked_at__isnull=True)
        if self.value() == "revoked":
            return queryset.filter(revoked_at__isnull=False)
        return queryset


@admin.register(ApiKey)
class ApiKeyAdmin(admin.ModelAdmin):
    # What tells keys apart and whether one works, readable beside the sidebar and the filters
    # at 1024 px: the issuer is the name's title, the scopes the kind's; times on the key's page.
    list_display = ["prefix", "key_name", "state", "kind", "workspace", "last_used"]
    list_filter = [ApiKeyStateFilter, "workspace"]
    list_select_related = ["workspace", "issued_by__user"]
    search_fields = ["prefix", "name", "workspace__slug", "issued_by__user__email"]
    # key_hash is never shown nor editable; only the name can change after issuing.
    fields = ["id", "prefix", "name", "workspace", "issued_by", "scopes", "created_at", "last_used_at",
              "expires_at", "revoked_at"]  # fmt: skip
    readonly_fields = [f for f in fields if f != "name"]
    actions = ["revoke"]

    def get_form(self, request, obj=None, change=False, **kwargs):
        if obj is None:
            kwargs["form"] = IssueApiKeyForm
        return super().get_form(request, obj, change=change, **kwargs)

    def get_fields(self, request, obj=None):
        return ["issued_by", "name", "scopes"] if obj is None else self.fields

    def get_readonly_fields(self, request, obj=None):
        return [] if obj is None else self.readonly_fields

    def has_delete_permission(self, request, obj=None) -> bool:
        return False  # revoke instead, so the key's history stays

    def save_model(self, request, obj: ApiKey, form, change: bool) -> None:
        if change:
            obj.save(update_fields=["name"])
            return
        data = form.cleaned_data
        issued = services.issue_api_key(membership=data["issued_by"], scopes=data["scopes"], name=data["name"])
        request._issued_api_key = issued.key  # read once by response_add, never stored
        obj.__dict__.update({k: v for k, v in issued.api_key.__dict__.items() if k != "_state"})
        obj._state.adding = False

    def response_add(self, request: HttpRequest, obj: ApiKey, post_url_continue=None) -> HttpResponse:
        key = getattr(request, "_issued_api_key", None)
        if key is None:
            return super().response_add(request, obj, post_url_continue)
        response = TemplateResponse(
            request,
            "admin/tenancy/apikey/issued.html",
            {
                **self.admin_site.each_context(request),
                "title": "API key issued",
                "opts": self.opts,
                "api_key": obj,
                "key": key,
                "changelist_url": reverse("admin:tenancy_apikey_changelist"),
                "change_url": reverse("admin:tenancy_apikey_change", args=[obj.pk]),
            },
        )
        response["Cache-Control"] = "no-store"
        return response

    @admin.display(description="name", ordering="name")
    def key_name(self, obj: ApiKey) -> str:
        issuer = obj.issued_by.user.email or obj.issued_by.user.username
        return format_html('<span title="issued by {}">{}</span>', issuer, obj.name)

    @admin.display(description="state")
    def state(self, obj: ApiKey) -> str:
        if obj.revoked_at is not None:
            return format_html('<span title="{}">revoked</span>', obj.revoked_at.isoformat())
        if obj.expires_at is not None and obj.expires_at <= timezone.now():
            return format_html('<span title="{}">expired</span>', obj.expires_at.isoformat())
        return "active"

    @admin.display(description="last used", ordering="last_used_at")
    def last_used(self, obj: ApiKey) -> str:
        return short_time(obj.last_used_at)

    @admin.display(description="kind")
    def kind(self, obj: ApiKey) -> str:
        return format_html('<span title="{}">{}</span>', " ".join(obj.scopes), "ingest" if obj.is_ingest else "read")

    @admin.action(description="Revoke selected keys")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiKey]) -> None:
        for api_key in queryset:
            services.revoke_api_key(api_key=api_key)
        self.message_user(request, f"Revoked {len(queryset)} key(s).", messages.SUCCESS)
