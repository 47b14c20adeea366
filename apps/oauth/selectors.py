"""Reads for the OAuth screens and the admin."""

from __future__ import annotations

from django.db.models import QuerySet

from apps.tenancy.models import Membership


def consentable_memberships(*, user) -> QuerySet[Membership]:
    """The workspaces a member may grant a client access to: active membership, workspace
    not suspended."""
    return (
        Membership.objects.filter(user=user, is_active=True, workspace__suspended_at__isnull=True)
        .select_related("workspace")
        .order_by("workspace__name", "workspace__slug")
    )
