"""Webhook delivery of the MCP Events extension: `events/subscribe` and `events/unsubscribe`.

A subscription is a webhook endpoint of the workspace owned by mcp (`owner = "mcp"`: the REST
matcher never feeds it and the REST API neither lists nor changes it), so its deliveries are
drained, retried, SSRF-guarded and signed as the REST ones; what they carry is
apps/mcp/events_delivery.py's. Its id is derived from (principal, url, name, arguments), so a
repeat subscribe finds the same row; its `filters` are the subscription's own; its grant
(`refreshBefore`) is the endpoint's `expires_at`, past which nothing is queued and
`expire_subscriptions` deletes it. The secret is the client's `whsec_` value, sealed; a refresh
with a new one keeps the old one signing beside it for `ROTATION_GRACE`. A subscribe answers
with the watermark `cursor`; one that starts or revives a subscription from a `cursor` replays
what followed it. Before the first delivery to a URL the principal has not used, the URL must
echo a signed challenge, through the same guarded dialler; failures answer `-32015` with a
category, never the endpoint's response. The reasons: docs/decisions/mcp-events-subscribe.md and
docs/decisions/mcp-events-delivery.md. Errors are `events_extension.EventsError`s."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import ssl
import logging
import time
from datetime import datetime, timedelta
from functools import partial
from typing import Any

import httpcore
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from apps.access.principal import Principal
from apps.core.errors import ApiError
from apps.core.timestamps import iso_ms
from apps.events import positions
from apps.mcp import events_delivery, events_extension
from apps.mcp.arguments import ToolArgumentError, validate_arguments
from apps.mcp.events_delivery import OWNER, SUBSCRIPTION_HEADER, WEBHOOK_TYPES
from apps.mcp.events_extension import ARGUMENTS, INVALID_PARAMS, NOT_FOUND, UNSUPPORTED, EventsError, event_type_of
from apps.webhooks import destinations, keys, outbound, services, standard
from apps.webhooks.models import DisabledReason, EndpointSigning, WebhookEndpoint

logger = logging.getLogger("connect.mcp")

CALLBACK_ENDPOINT_ERROR = -32015
FORBIDDEN = -32012
# How often a process's upkeep re-checks the live subscriptions' credentials (one batch check):
# the delivery-time re-verification the extension asks for, where no attempt or save found it.
REVERIFY_SECONDS = 60.0
_reverified_at = [float("-inf")]

# Grants: the suggestion clamped to [MIN, MAX]; none suggested → DEFAULT; `ttlMs: null` (no
# expiry) is granted MAX, finite, which the extension allows a server unwilling to hold state
# forever. A day at most: past that the refresh traffic saved is nil and abandoned state grows.
DEFAULT_TTL = timedelta(hours=1)
MIN_TTL = timedelta(seconds=10)
MAX_TTL = timedelta(days=1)
ROTATION_GRACE = timedelta(minutes=5)

NAME_PREFIX = "MCP events/subscribe "  # what the health board and the admin show; never read back
VERIFY_TIMEOUT_SECONDS = 5.0
MAX_CHALLENGE_RESPONSE = 4096
SECRET_MIN_BYTES, SECRET_MAX_BYTES = 24, 64


def live_subscriptions(now: datetime):
    """Subscriptions not deleted and not past their grant (of every workspace)."""
    return WebhookEndpoint.objects.filter(owner=OWNER, deleted_at__isnull=True, expires_at__gt=now)


def register() -> None:
    for method in ("events/subscribe", "events/unsubscribe"):
        events_extension.HANDLERS[method] = answer


def upkeep() -> None:
    """The MCP door's part of every sweep (apps/webhooks/owners.py): owed catch-ups the log now
    allows, a periodic re-check of the subscriptions' credentials, and the end of those whose
    credential no longer holds."""
    events_delivery.catch_up_owed()
    if time.monotonic() - _reverified_at[0] >= REVERIFY_SECONDS:
        _reverified_at[0] = time.monotonic()
        services.reconcile_installations(list(live_subscriptions(timezone.now()).filter(active=True)))
    terminate_unauthorized()


def terminate_unauthorized() -> int:
    """Subscriptions whose credential no longer holds (revoked, expired, its member deactivated,
    its scope gone: apps/webhooks/installation.py turned them off and cancelled their deliveries)
    end: one signed `terminated` envelope is attempted to the callback, `-32012 Forbidden`, and
    the subscription is deleted, so a later subscribe is a fresh one (refused while the cause
    holds). Returns how many ended."""
    ended = 0
    revoked = live_subscriptions(timezone.now()).filter(active=False,
                                                        disabled_reason=DisabledReason.INSTALLATION_UNAUTHORIZED)
    for endpoint in revoked:
        envelope = {"type": "terminated", "error": {"code": FORBIDDEN, "message": "Forbidden", "data": {
            "reason": "access revoked: the credential that subscribed no longer holds svc:sessions:read "
                      "in this workspace"}}}
        try:
            post_envelope(endpoint.url, services.standard_secrets(endpoint, now=timezone.now()), endpoint.id, envelope)
        except (httpcore.TimeoutException, httpcore.NetworkError, httpcore.ConnectError, httpcore.ProtocolError,
                outbound.BlockedDestination, OSError) as error:
            logger.info("terminated envelope not delivered", extra={"endpoint_id": endpoint.id,
                                                                     "error_kind": type(error).__name__})
        with transaction.atomic():
            still = WebhookEndpoint.objects.select_for_update().filter(
                pk=endpoint.pk, deleted_at__isnull=True, active=False,
                disabled_reason=DisabledReason.INSTALLATION_UNAUTHORIZED).first()
            if still is not None:
                services.delete_endpoint(endpoint=still)
                ended += 1
    return ended


def answer(method: str, params: dict[str, Any], principal: Principal) -> dict[str, Any]:
    """The result of `events/subscribe` or `events/unsubscribe`, or `EventsError`."""
    event_type = event_type_of(params, principal)
    if event_type not in WEBHOOK_TYPES:
        raise EventsError(UNSUPPORTED, f"{event_type} offers poll delivery only, not webhook",
                          {"feature": "deliveryMode", "value": "webhook", "name": event_type})
    arguments = _arguments(params, event_type)
    delivery = params.get("delivery")
    if not isinstance(delivery, dict):
        raise EventsError(INVALID_PARAMS, "params.delivery is required: {mode: \"webhook\", url, secret}")
    if delivery.get("mode", "webhook") != "webhook":
        raise EventsError(INVALID_PARAMS, 'params.delivery.mode must be "webhook"')
    url = delivery.get("url")
    if not isinstance(url, str) or not url:
        raise EventsError(INVALID_PARAMS, "params.delivery.url is required: the https URL to deliver to")
    key = _principal_key(principal)
    endpoint_id = subscription_id(key, url, event_type, arguments)
    if method == "events/unsubscribe":
        return unsubscribe(principal, endpoint_id)
    return subscribe(principal, params, endpoint_id, event_type, arguments, url, _secret(delivery))


def _arguments(params: dict[str, Any], event_type: str) -> dict[str, Any]:
    arguments = params.get("arguments")
    if arguments is not None and not isinstance(arguments, dict):
        raise EventsError(INVALID_PARAMS, "params.arguments must be an object")
    try:
        return validate_arguments(ARGUMENTS[event_type], arguments or {})
    except ToolArgumentError as error:
        why = f"params.arguments.{error.extra['argument']} {error.extra['detail']}"
        raise EventsError(INVALID_PARAMS, why) from None


def _secret(delivery: dict[str, Any]) -> bytes:
    value = delivery.get("secret")
    why = (f"params.delivery.secret is required: a Standard Webhooks secret, {standard.SECRET_PREFIX} followed by "
           f"base64 of {SECRET_MIN_BYTES} to {SECRET_MAX_BYTES} random bytes")
    if not isinstance(value, str) or not value.startswith(standard.SECRET_PREFIX):
        raise EventsError(INVALID_PARAMS, why)
    try:
        secret = base64.b64decode(value[len(standard.SECRET_PREFIX):], validate=True)
    except (binascii.Error, ValueError):
        raise EventsError(INVALID_PARAMS, why) from None
    if not SECRET_MIN_BYTES <= len(secret) <= SECRET_MAX_BYTES:
        raise EventsError(INVALID_PARAMS, why)
    return secret


def _principal_key(principal: Principal) -> dict[str, Any]:
    """Who subscribes, as the key names them; with the installation fields of the endpoint."""
    application_id = None
    if principal.kind == "oauth":
        from apps.oauth.models import AccessToken

        application_id = AccessToken.objects.filter(pk=principal.credential_id).values_list(
            "application_id", flat=True).first()
    return {"workspace": principal.workspace.id, "member": principal.issuer.pk, "kind": principal.kind,
            "credential": principal.credential_id if principal.kind == "api_key" else None,
            "application": application_id}


def subscription_id(key: dict[str, Any], url: str, event_type: str, arguments: dict[str, Any]) -> str:
    """Deterministic over the key (canonical JSON): the endpoint's primary key."""
    canonical = json.dumps([key, url, event_type, arguments], sort_keys=True, separators=(",", ":"))
    return "wh_mcp" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:32]


def _grant(params: dict[str, Any], now: datetime) -> datetime:
    if "ttlMs" not in params:
        return now + DEFAULT_TTL
    ttl_ms = params["ttlMs"]
    if ttl_ms is None:
        return now + MAX_TTL
    if isinstance(ttl_ms, bool) or not isinstance(ttl_ms, (int, float)) or ttl_ms != ttl_ms:
        raise EventsError(INVALID_PARAMS, "params.ttlMs must be a number of milliseconds, or null")
    bounded = min(max(ttl_ms, MIN_TTL.total_seconds() * 1000), MAX_TTL.total_seconds() * 1000)
    return now + timedelta(milliseconds=bounded)


def _check_url(url: str) -> None:
    """https (http too only where the development flag allows private receivers), and every
    address its host resolves to now passes the webhooks' SSRF rules; delivery checks again."""
    if not url.lower().startswith("https://") and not settings.CONNECT_WEBHOOKS_ALLOW_PRIVATE:
        raise EventsError(INVALID_PARAMS, "params.delivery.url must be an https URL")
    try:
        destinations.check_destination(url)
    except ApiError as refused:
        raise EventsError(INVALID_PARAMS, f"params.delivery.{refused.extra['detail']}") from None


def _verified(principal: Principal, key: dict[str, Any], url: str, now: datetime) -> bool:
    """A live subscription of this principal (the same key, or OAuth application and member)
    already delivers to `url`: the URL confirmed it for them."""
    same = ({"credential_kind": "api_key", "credential_id": key["credential"]} if principal.kind == "api_key"
            else {"credential_kind": principal.kind, "oauth_application_id": key["application"]})
    return live_subscriptions(now).filter(workspace=principal.workspace, created_by=principal.issuer, url=url,
                                          **same).exists()


def _resume_from(params: dict[str, Any]) -> tuple[positions.Position | None, int | None]:
    """`cursor` (a position of the log, from a delivery, a subscribe or events/poll) and
    `maxAgeMs`; `-32602` for anything else."""
    cursor, max_age_ms = params.get("cursor"), params.get("maxAgeMs")
    if isinstance(max_age_ms, float) and max_age_ms.is_integer():
        max_age_ms = int(max_age_ms)
    if max_age_ms is not None and (isinstance(max_age_ms, bool) or not isinstance(max_age_ms, int) or max_age_ms < 0):
        raise EventsError(INVALID_PARAMS, "params.maxAgeMs must be a non-negative integer of milliseconds")
    if cursor is None:
        return None, max_age_ms
    try:
        if not isinstance(cursor, str) or not cursor.startswith(positions.POSITION_PREFIX):
            raise positions.BadAfter("not a cursor this server wrote")
        return positions.decode_position(cursor), max_age_ms
    except positions.BadAfter as bad:
        raise EventsError(INVALID_PARAMS, f"params.cursor: {bad.why}") from None


def subscribe(principal: Principal, params: dict[str, Any], endpoint_id: str, event_type: str,
              arguments: dict[str, Any], url: str, secret: bytes) -> dict[str, Any]:
    now = timezone.now()
    after, max_age_ms = _resume_from(params)
    granted = _grant(params, now)
    # To the millisecond, as `refreshBefore` says it: the column holds what the client was told.
    refresh_before = granted.replace(microsecond=granted.microsecond // 1000 * 1000)
    _check_url(url)
    key = _principal_key(principal)
    if not _verified(principal, key, url, now):
        verify_callback(url, secret, endpoint_id)
    session = arguments.get("sessionId")
    fields = {
        "workspace": principal.workspace,
        "owner": OWNER,
        "expires_at": refresh_before,
        "name": (f"{NAME_PREFIX}{event_type}" + (f" of {session}" if session else ""))[:200],
        "url": url,
        "filters": [{"type": event_type, **({"sessionId": session} if session else {})}],
        "signing": EndpointSigning.STANDARD_WEBHOOKS,
        "active": True,
        "disabled_reason": "",
        "deleted_at": None,
        "updated_at": now,
        # The installation: the caller's credential answers for the deliveries from now on.
        "created_by": principal.issuer,
        "credential_kind": principal.kind,
        "credential_id": str(principal.credential_id),
        "oauth_application_id": key["application"],
    }
    truncated = suspended = False
    with transaction.atomic():
        endpoint = WebhookEndpoint.objects.select_for_update().filter(pk=endpoint_id).first()
        starts = endpoint is None or endpoint.deleted_at is not None or not endpoint.active or (
            endpoint.expires_at is not None and endpoint.expires_at <= now)
        if endpoint is None:
            endpoint = WebhookEndpoint(id=endpoint_id, created_at=now, sealed_secret=keys.seal(secret), **fields)
            events_delivery.owe_catch_up(endpoint)
            endpoint.save(force_insert=True)
        else:
            lapsed = endpoint.deleted_at is not None or not endpoint.active
            current = keys.unseal(endpoint.sealed_secret) if endpoint.sealed_secret is not None else None
            if current is not None and not lapsed and not hmac.compare_digest(current, secret):
                endpoint.sealed_previous_secret = endpoint.sealed_secret
                endpoint.previous_secret_until = now + ROTATION_GRACE
            elif lapsed:
                endpoint.sealed_previous_secret, endpoint.previous_secret_until = None, None
            endpoint.sealed_secret = keys.seal(secret)
            for field, value in fields.items():
                setattr(endpoint, field, value)
            if starts:
                events_delivery.owe_catch_up(endpoint)
            endpoint.save()
            # A refresh is the client's sign of life: a suspended delivery resumes, its held
            # deliveries due at once.
            suspended = services.resume_endpoint(endpoint=endpoint) and not starts
        # A live subscription is at or past any cursor its client holds: a no-op. One that starts
        # (or revives) from a cursor is owed what followed it.
        if starts and after is not None:
            truncated = events_delivery.replay(endpoint, after=after, max_age_ms=max_age_ms)
        if starts:
            # What a transaction open meanwhile recorded without seeing the subscription: queued
            # once that transaction has ended (now, or by a later sweep).
            transaction.on_commit(partial(events_delivery.catch_up, endpoint_id), robust=True)
    result = {"id": endpoint_id, "refreshBefore": iso_ms(refresh_before),
              "cursor": events_delivery.cursor_of(endpoint_id), "truncated": truncated}
    if not starts:
        result["deliveryStatus"] = events_delivery.delivery_status(endpoint, suspended=suspended)
    return result


def unsubscribe(principal: Principal, endpoint_id: str) -> dict[str, Any]:
    endpoint = live_subscriptions(timezone.now()).filter(pk=endpoint_id, workspace=principal.workspace).first()
    if endpoint is None:
        raise EventsError(NOT_FOUND, "No subscription of this credential has this name, arguments and delivery.url",
                          {"kind": "subscription"})
    services.delete_endpoint(endpoint=endpoint)
    return {}


def post_envelope(url: str, signing: list[bytes], endpoint_id: str, envelope: dict[str, Any]) -> tuple[int, bytes]:
    """POST one control envelope outside the drains (the handshake, a termination): signed and
    headed like a delivery (`webhook-id` `msg_<type>_<random>`, `X-MCP-Subscription-Id`),
    through the same guarded dialler (every address checked as it is dialled, no redirect
    followed), 5 s at most. Returns (status, the first bytes of the answer); network failures
    raise httpcore's errors or `outbound.BlockedDestination`."""
    body = json.dumps(envelope, separators=(",", ":")).encode()
    headers = [("Content-Type", "application/json"), ("User-Agent", "Connect-MCP-Events"),
               (SUBSCRIPTION_HEADER, endpoint_id)]
    headers += standard.headers(signing, msg_id=events_delivery.envelope_id(envelope["type"]),
                                timestamp=int(time.time()), body=body)
    timeouts = {name: VERIFY_TIMEOUT_SECONDS for name in ("connect", "read", "write", "pool")}
    pool = httpcore.ConnectionPool(ssl_context=ssl.create_default_context(),
                                   network_backend=outbound.GuardedBackend(destinations.policy()))
    status, answer_body = 0, b""
    try:
        with pool.stream("POST", url, headers=headers, content=body, extensions={"timeout": timeouts}) as response:
            status = response.status
            for chunk in response.iter_stream():
                answer_body += chunk
                if len(answer_body) > MAX_CHALLENGE_RESPONSE:
                    break
    finally:
        pool.close()
    return status, answer_body


def verify_callback(url: str, secret: bytes, endpoint_id: str) -> None:
    """The verification handshake: POST a signed `verification` envelope and require its
    `challenge` back in a 2xx JSON body. `-32015` with the failure's category otherwise."""
    challenge = secrets.token_urlsafe(32)
    status, answer_body = 0, b""
    try:
        envelope = {"type": "verification", "challenge": challenge}
        status, answer_body = post_envelope(url, [secret], endpoint_id, envelope)
    except outbound.BlockedDestination:
        raise EventsError(INVALID_PARAMS,
                          "params.delivery.url resolves to an address deliveries may not reach") from None
    except httpcore.TimeoutException:
        _callback_failed("timeout")
    except (httpcore.ConnectError, httpcore.NetworkError, httpcore.ProtocolError, OSError) as error:
        _callback_failed("tls_error" if _is_tls(error) else "connection_refused")
    if 400 <= status < 500:
        _callback_failed("http_4xx")
    if status >= 500:
        _callback_failed("http_5xx")
    try:
        echoed = json.loads(answer_body).get("challenge") if 200 <= status < 300 else None
    except (ValueError, AttributeError):
        echoed = None
    if not isinstance(echoed, str) or not hmac.compare_digest(echoed.encode(), challenge.encode()):
        _callback_failed("challenge_failed")


def _is_tls(error: BaseException) -> bool:
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, ssl.SSLError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _callback_failed(reason: str) -> None:
    raise EventsError(CALLBACK_ENDPOINT_ERROR, "The callback endpoint did not confirm it wants these deliveries",
                      {"reason": reason})


def expire_subscriptions() -> int:
    """Delete the subscriptions past their grant (their pending deliveries are cancelled).
    Runs every minute (apps/mcp/apps.py); returns how many it ended."""
    ended = 0
    for endpoint in WebhookEndpoint.objects.filter(owner=OWNER, deleted_at__isnull=True,
                                                   expires_at__lte=timezone.now()):
        services.delete_endpoint(endpoint=endpoint)
        ended += 1
    return ended
