"""The signed-in page, `/accounts/profile/`: where Django's login sends a member who came to
`/accounts/login` by themselves (no `next`; `LOGIN_REDIRECT_URL` is Django's default). It says
who is signed in and in which workspaces, links to the admin (staff) and the API docs, and
signs out. Always an HTML page: anonymous visitors, also just after signing out, are sent to
the login page, never answered with the API's JSON 404."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache

from apps.oauth.selectors import consentable_memberships


@never_cache
@login_required
def signed_in(request: HttpRequest) -> HttpResponse:
    memberships = consentable_memberships(user=request.user)
    return render(request, "registration/signed_in.html", {"memberships": memberships})
