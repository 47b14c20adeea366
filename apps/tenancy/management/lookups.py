"""Lookups shared by the tenancy commands: each turns a missing row into a `CommandError`."""

from __future__ import annotations

from django.core.management.base import CommandError
from django.db.models import Q

from apps.tenancy.models import Membership, Workspace


def workspace_by_slug(slug: str) -> Workspace:
    try:
        return Workspace.objects.get(slug=slug)
    except Workspace.DoesNotExist:
        raise CommandError(f"unknown workspace: {slug}") from None


def membership_by_email(workspace: Workspace, email: str) -> Membership:
    # add_member creates users with username = email; older users may differ in case.
    membership = (
        Membership.objects.select_related("user", "workspace")
        .filter(Q(user__email__iexact=email) | Q(user__username=email), workspace=workspace)
        .first()
    )
    if membership is None:
        raise CommandError(f"{email} is not a member of {workspace.slug}")
    return membership
