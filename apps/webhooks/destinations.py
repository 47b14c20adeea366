"""Where a webhook may be sent: the SSRF policy in force (settings) and the create/update-time
check of a URL, whose `detail` names the rule broken in wire-safe words. The connect-time check
(outbound.GuardedBackend) applies the same policy to the address actually dialled."""

from __future__ import annotations

import dataclasses
import ipaddress
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings

from apps.core.errors import invalid
from apps.webhooks import outbound
from engine import ssrf


def policy() -> ssrf.Policy:
    extra = tuple(getattr(settings, "CONNECT_WEBHOOK_DENY_NETWORKS", ()))
    return ssrf.Policy(
        allow_private=settings.CONNECT_WEBHOOKS_ALLOW_PRIVATE,
        deny_networks=ssrf.DEFAULT_DENY_NETWORKS + extra,
    )


def check_destination(url: Any) -> str:
    """`400 invalid_request` unless the URL and every address its host resolves to pass the
    SSRF rules now. The connect-time check (outbound.GuardedBackend) repeats it for real. The
    `detail` names the rule broken, never the URL or an address (a URL may carry a secret). The
    name is looked up with the development flag too: the flag never lifts the deny list."""
    rules = policy()
    try:
        destination = ssrf.check_url(url, rules)
    except ssrf.UnsafeDestination:
        raise invalid("url", _url_problem(url, rules) + _development_hint(url, rules)) from None
    if destination.literal is None:
        try:
            answers = outbound.resolve(destination.host, destination.port)
        except OSError:
            raise invalid("url", "its host does not resolve") from None
        try:
            ssrf.check_resolved(destination.host, answers, rules)
        except ssrf.UnsafeDestination:
            raise invalid("url", _resolved_problem(answers, rules) + _development_hint(url, rules, answers)) from None
    return url


DEVELOPMENT_HINT = (
    "; a receiver on this machine or a private network needs the server started with "
    "CONNECT_WEBHOOKS_ALLOW_PRIVATE=1 (development only; `make run` sets it)"
)


def _development_hint(url: Any, rules: ssrf.Policy, answers: list[str] | None = None) -> str:
    """What to set, when the development flag is off and is exactly what would let `url` pass
    (http://, localhost, loopback or private addresses); never for the deny list, which the
    flag does not lift."""
    if rules.allow_private:
        return ""
    lifted = dataclasses.replace(rules, allow_private=True)
    try:
        destination = ssrf.check_url(url, lifted)
        if answers is not None:
            ssrf.check_resolved(destination.host, answers, lifted)
    except (ssrf.UnsafeDestination, ValueError):
        return ""
    return DEVELOPMENT_HINT


def _url_problem(url: Any, rules: ssrf.Policy) -> str:
    """Which of check_url's rules `url` breaks, in wire-safe words."""
    try:
        parts = urlsplit(url) if isinstance(url, str) else None
        scheme = parts.scheme.lower() if parts else ""
    except ValueError:
        parts, scheme = None, ""
    if not parts or not parts.netloc or len(url) > ssrf.MAX_URL_LENGTH or any(c.isspace() for c in url):
        return f"must be an absolute https URL of at most {ssrf.MAX_URL_LENGTH} characters"
    if scheme not in ({"https", "http"} if rules.allow_private else {"https"}):
        return "must be https"
    if "@" in parts.netloc:
        return "must not carry credentials"
    try:
        _, literal = ssrf.parse_host(parts.netloc.rpartition(":")[0] if parts.port else parts.netloc)
    except (ssrf.UnsafeDestination, ValueError):
        return "must name a valid host"
    if literal is not None:
        return "is " + _address_problem(ssrf.address_problem(literal, rules) or "refused")
    return "names a refused host (localhost or the deny list)"


def _resolved_problem(answers: list[str], rules: ssrf.Policy) -> str:
    for answer in answers:
        try:
            problem = ssrf.address_problem(ipaddress.ip_address(answer.split("%")[0]), rules)
        except ValueError:
            continue
        if problem:
            return "resolves to " + _address_problem(problem)
    return "resolves to no address"


def _address_problem(problem: str) -> str:
    if problem.startswith("carries"):  # "carries <address>, …": the address stays out of the body
        return "an IPv6 address embedding a refused IPv4 address"
    return f"an address that is {problem}"
