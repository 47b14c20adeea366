"""Webhook endpoints, deliveries, attempts and signing keys.

A Delivery row is the truth about a delivery: its status, attempt count, next attempt time
and lease. django-q2 tasks carry nothing: a drain task claims due deliveries from these rows, so
losing a task loses nothing; the sweeper queues a drain while any delivery is due or its lease expired.
"""

from __future__ import annotations

import uuid

from django.db import models

from apps.core.ids import new_id
from apps.tenancy.models import Membership, Workspace


def new_endpoint_id() -> str:
    return new_id("wh_")


def attempt_token() -> str:
    """The token of one batch's attempt lease (apps/webhooks/delivery.py)."""
    return uuid.uuid4().hex


def new_delivery_id() -> str:
    return new_id("dlv_")


class EndpointSigning(models.TextChoices):
    # The contract's Svc-* headers and Ed25519 signature only (every delivery carries them).
    SVC = "svc"
    # Also `webhook-id`, `webhook-timestamp` and `webhook-signature` (HMAC-SHA256 with the
    # endpoint's `whsec_` secret), for receivers that verify with a Standard Webhooks library.
    STANDARD_WEBHOOKS = "standard-webhooks"


class DisabledReason(models.TextChoices):
    ENDPOINT_DISABLED = "endpoint_disabled", "disabled by a caller"
    INSTALLATION_UNAUTHORIZED = "installation_unauthorized", "its installation's credential no longer holds"


class WebhookEndpoint(models.Model):
    """A customer's receiver. Deleting one through the API marks it deleted (its deliveries
    keep their history until purged) and it answers 404 from then on.

    Invariant: `active` is false exactly when `disabled_reason` is set (a deleted endpoint is
    inactive too, whatever its reason); an endpoint whose installation stops holding is made
    inactive with `installation_unauthorized` (apps/webhooks/installation.py)."""

    id = models.CharField(primary_key=True, max_length=40, default=new_endpoint_id, editable=False)
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="webhook_endpoints")
    name = models.CharField(max_length=200)
    url = models.CharField(max_length=2048)
    filters = models.JSONField()
    active = models.BooleanField(default=True)
    disabled_reason = models.CharField(max_length=32, blank=True, default="", choices=DisabledReason.choices)
    signing = models.CharField(max_length=24, default=EndpointSigning.SVC, choices=EndpointSigning.choices)
    # Standard Webhooks secrets (the random bytes behind `whsec_`), sealed like the signing
    # keys' private halves (apps/webhooks/keys.py), so a database dump alone signs nothing.
    # The previous secret still signs, beside the current one, until `previous_secret_until`.
    sealed_secret = models.BinaryField(null=True, blank=True, editable=False)
    sealed_previous_secret = models.BinaryField(null=True, blank=True, editable=False)
    previous_secret_until = models.DateTimeField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    deleted_at = models.DateTimeField(null=True, blank=True)
    # The installation: the credential that created the endpoint. Deliveries are cancelled
    # (`installation_unauthorized`) once it is revoked, its member deactivated or its scopes gone.
    created_by = models.ForeignKey(Membership, on_delete=models.CASCADE, related_name="+")
    credential_kind = models.CharField(max_length=16)  # "api_key" | "oauth"
    credential_id = models.CharField(max_length=64)  # ApiKey id, or the OAuth access token's pk
    oauth_application_id = models.BigIntegerField(null=True, blank=True)
    # The door that made it: "" for the REST API's endpoints; otherwise the app that owns it
    # (e.g. "mcp" for the MCP events extension's subscriptions). An owned endpoint gets only what
    # its owner queues (`services.queue_delivery`), never the REST matcher's bodies, and the
    # REST API neither lists nor changes it (selectors.live_endpoints): its owner's wire does.
    owner = models.CharField(max_length=16, blank=True, default="")
    # When it stops: no new delivery is queued for it from then on (selectors.deliverable_endpoints)
    # and its owner deletes it. Null: it lasts until deleted (every REST endpoint).
    expires_at = models.DateTimeField(null=True, blank=True)
    # An owner's catch-up still owed (apps/webhooks/owners.py): events of the log after
    # `catch_up_after` (a `pos_` position: the log's settled end when the endpoint started) and
    # below `catch_up_until` (the log's end read once the endpoint was committed; null until
    # then) may have been recorded by transactions whose matcher ran before the endpoint was
    # visible: those running when it started (`catch_up_snapshot`: {"end": the log's end then,
    # "running": their positions}) or begun after. Its watermark (apps/webhooks/watermark.py)
    # never passes `catch_up_after` while it is set; the owner clears all three once done.
    catch_up_after = models.CharField(max_length=120, blank=True, default="", db_default="")
    catch_up_until = models.BigIntegerField(null=True, blank=True)
    catch_up_snapshot = models.JSONField(null=True, blank=True)
    # Delivery held after sustained failure (an owner's `Door.suspend` rule): while set, the drains
    # claim none of its deliveries, which stay pending (new ones are still queued) and keep their
    # attempt counts. `resumed_at`: when its owner last lifted a suspension; the failure window
    # never reaches back before it.
    suspended_at = models.DateTimeField(null=True, blank=True)
    resumed_at = models.DateTimeField(null=True, blank=True)
    # The endpoint's place in the drains' rotation (fair queueing over worker time,
    # apps/webhooks/delivery.py). `fair_clock`: where its next batch starts on a clock shared by
    # all endpoints, pushed on by the seconds each batch of it used, so a receiver that answers
    # slowly waits while quick ones go first. `fair_start`: the clock at its last claim, so
    # `fair_clock - fair_start` is what its last batch cost; the highest `fair_start` over all
    # endpoints is the rotation's current time, which an endpoint back from idle starts at
    # (idle time is not saved up as credit against the busy ones).
    fair_clock = models.FloatField(default=0.0, editable=False)
    fair_start = models.FloatField(default=0.0, editable=False)
    # Whether an attempt of its last batch took SLOW_ATTEMPT_SECONDS or more: the slow endpoints
    # share CONNECT_WEBHOOK_SLOW_BATCHES workers between them, so the others always have one.
    slow = models.BooleanField(default=False, editable=False)

    class Meta:
        indexes = [models.Index(fields=["workspace", "created_at", "id"], name="webhook_ws_created")]

    def __str__(self) -> str:
        return f"{self.name} ({self.id})"


class DeliveryStatus(models.TextChoices):
    PENDING = "pending"
    RETRYING = "retrying"
    SUCCEEDED = "succeeded"
    DEAD_LETTER = "dead_letter"
    CANCELLED = "cancelled"


ACTIVE_STATUSES = (DeliveryStatus.PENDING, DeliveryStatus.RETRYING)
TERMINAL_STATUSES = (DeliveryStatus.SUCCEEDED, DeliveryStatus.DEAD_LETTER, DeliveryStatus.CANCELLED)


class DeliveryKind(models.TextChoices):
    EVENT = "event"
    TEST = "test"


class StopReason(models.TextChoices):
    MAX_ATTEMPTS = "max_attempts", "every attempt of the retry schedule failed"
    ENDPOINT_DELETED = "endpoint_deleted", "its endpoint was deleted"
    ENDPOINT_DISABLED = "endpoint_disabled", "its endpoint was turned off"
    INSTALLATION_UNAUTHORIZED = "installation_unauthorized", "the credential that installed the endpoint lapsed"
    # Only an owned endpoint's deliveries (apps/webhooks/owners.py): its owner made these receiver
    # answers final. A REST endpoint's delivery retries them, as the contract says.
    RECEIVER_GONE = "receiver_gone", "the receiver answered 410 Gone: it does not want this delivery"
    PAYLOAD_TOO_LARGE = "payload_too_large", "the receiver answered 413: the body is too large for it"


# What a REST endpoint's delivery may stop with: the contract's reasons (the REST API shows no
# owned endpoint's deliveries, so its wire never carries the others).
REST_STOP_REASONS = (StopReason.MAX_ATTEMPTS, StopReason.ENDPOINT_DELETED, StopReason.ENDPOINT_DISABLED,
                     StopReason.INSTALLATION_UNAUTHORIZED)


class Delivery(models.Model):
    """One event for one endpoint. The body is stored here, byte for byte as signed, so retries
    and replays never depend on the outbox row (which is purged on its own schedule); an owned
    endpoint's door may write each attempt's body from it (apps/webhooks/owners.py `render`).

    Invariant: an attempt runs only while its worker holds the lease (`lease_token` matches and
    `lease_until` is in the future), and leases are taken only by an atomic claim of due rows
    without a live lease, so a delivery is never attempted by two workers at once."""

    id = models.CharField(primary_key=True, max_length=40, default=new_delivery_id, editable=False)
    workspace = models.ForeignKey(Workspace, on_delete=models.CASCADE, related_name="+")
    endpoint = models.ForeignKey(WebhookEndpoint, on_delete=models.CASCADE, related_name="deliveries")
    event_id = models.CharField(max_length=40)
    event_type = models.CharField(max_length=40)
    kind = models.CharField(max_length=8, choices=DeliveryKind.choices, default=DeliveryKind.EVENT)
    body = models.TextField()
    status = models.CharField(max_length=12, choices=DeliveryStatus.choices, default=DeliveryStatus.PENDING)
    attempt_count = models.PositiveIntegerField(default=0)
    last_http_status = models.PositiveIntegerField(null=True, blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    terminal_at = models.DateTimeField(null=True, blank=True)
    stop_reason = models.CharField(max_length=32, blank=True, default="")
    lease_until = models.DateTimeField(null=True, blank=True)
    lease_token = models.CharField(max_length=32, blank=True, default="")
    # True exactly when status is dead_letter (set by the one write that makes a dead letter),
    # so the back office can list dead letters first straight from an index.
    is_dead_letter = models.BooleanField(default=False)
    replay_of = models.ForeignKey("self", on_delete=models.SET_NULL, null=True, blank=True, related_name="+")
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()

    class Meta:
        verbose_name_plural = "deliveries"
        indexes = [
            models.Index(fields=["workspace", "created_at", "id"], name="delivery_ws_created"),
            # The sweeper: active deliveries by due time.
            models.Index(fields=["status", "next_attempt_at"], name="delivery_due"),
            # The purge: terminal deliveries by age.
            models.Index(fields=["terminal_at"], name="delivery_terminal"),
            models.Index(fields=["event_id"], name="delivery_event"),
            models.Index(fields=["endpoint", "created_at"], name="delivery_endpoint_created"),
            models.Index(fields=["status", "created_at"], name="delivery_status_created"),
            # The health board (apps/webhooks/health.py): an endpoint's deliveries of a time window
            # by outcome, counted from the index alone.
            models.Index(fields=["endpoint", "status", "created_at"], name="delivery_endpoint_outcome"),
            # The admin's default order: dead letters first, newest first.
            models.Index(fields=["is_dead_letter", "created_at", "id"], name="delivery_dead_first"),
            # A drain's claim: one endpoint's due deliveries, oldest first, among active ones only
            # (an endpoint's terminal history, kept 30 days, is not walked).
            models.Index(
                fields=["endpoint", "next_attempt_at"], name="delivery_endpoint_due",
                condition=models.Q(status__in=ACTIVE_STATUSES),
            ),
            # A claim's count of an endpoint's attempt batches in flight (leases not yet released):
            # a handful of rows per endpoint at most, whatever its backlog.
            models.Index(
                fields=["endpoint", "lease_until"], name="delivery_endpoint_leased",
                condition=models.Q(status__in=ACTIVE_STATUSES) & ~models.Q(lease_token=""),
            ),
        ]

    def __str__(self) -> str:
        return self.id

    @property
    def is_terminal(self) -> bool:
        return self.status in TERMINAL_STATUSES


class QueuedDrain(models.Model):
    """One row: whether a drain task is on django-q2's queue and not yet started, and until when
    that is trusted (`CONNECT_WEBHOOK_QUEUE_LEASE_SECONDS`). Whoever finds it unset or expired
    sets it and queues a drain; a drain unsets it as it starts, before it claims anything, so a
    delivery committed after that claim's snapshot queues the next drain (apps/webhooks/tasks.py).
    A drain lost with its broker is replaced once `until` passes."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1)
    until = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"drain queued until {self.until}" if self.until else "no drain queued"


class AttemptError(models.TextChoices):
    NETWORK_ERROR = "network_error"
    TIMEOUT = "timeout"
    REDIRECT = "redirect"
    HTTP_ERROR = "http_error"
    BLOCKED_DESTINATION = "blocked_destination"


class AttemptQuerySet(models.QuerySet):
    def bulk_create(self, objs, *args, **kwargs):
        """Fill each attempt's `endpoint` from its delivery where the caller did not (one query
        for those whose delivery is not loaded), so every way of writing attempts stores it."""
        objs = list(objs)
        missing = {a.delivery_id for a in objs if a.endpoint_id is None and not _delivery_loaded(a)}
        endpoints = dict(Delivery.objects.filter(id__in=missing).values_list("id", "endpoint_id")) if missing else {}
        for attempt in objs:
            if attempt.endpoint_id is None:
                attempt.endpoint_id = (attempt.delivery.endpoint_id if _delivery_loaded(attempt)
                                       else endpoints.get(attempt.delivery_id))
        return super().bulk_create(objs, *args, **kwargs)


def _delivery_loaded(attempt: DeliveryAttempt) -> bool:
    return DeliveryAttempt.delivery.is_cached(attempt)


class DeliveryAttempt(models.Model):
    delivery = models.ForeignKey(Delivery, on_delete=models.CASCADE, related_name="attempts")
    # The delivery's endpoint, copied when the attempt is written (an endpoint never changes on
    # a delivery), so the health board reads an endpoint's attempts of a time window from
    # `attempt_endpoint_started` without joining every delivery.
    # Nullable: rows written by the previous release during a rolling deploy have none until
    # the backfill of migration 0006 reaches them (docs/decisions/webhooks.md "The attempt's endpoint").
    # No index of its own (`attempt_endpoint_started` leads with it) and no database constraint:
    # it is a copy of the delivery's own checked reference, and adding a checked one would
    # re-read the whole table under lock while deploying (the ORM still cascades deletes).
    endpoint = models.ForeignKey(WebhookEndpoint, on_delete=models.CASCADE, related_name="+", null=True,
                                 blank=True, db_index=False, db_constraint=False, editable=False)
    number = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    completed_at = models.DateTimeField()
    http_status = models.PositiveIntegerField(null=True, blank=True)
    duration_ms = models.PositiveIntegerField()
    error = models.CharField(max_length=32, blank=True, default="", choices=AttemptError.choices)
    # What happened, as a sentence naming the host and port ("connection refused by
    # example.com:443"); never a header, a body or a secret (apps/webhooks/outbound.py).
    error_detail = models.CharField(max_length=300, blank=True, default="")

    objects = AttemptQuerySet.as_manager()

    class Meta:
        ordering = ["number"]
        indexes = [
            # The health board's attempts of the last 24 h per endpoint (durations, last error):
            # one range per endpoint, index only.
            models.Index(fields=["endpoint", "started_at", "duration_ms", "error"], name="attempt_endpoint_started"),
        ]
        constraints = [models.UniqueConstraint(fields=["delivery", "number"], name="attempt_unique_number")]

    def __str__(self) -> str:
        return f"{self.delivery_id} #{self.number}"

    def save(self, *args, **kwargs):
        if self.endpoint_id is None and self.delivery_id is not None:
            self.endpoint_id = self.delivery.endpoint_id
        super().save(*args, **kwargs)


class SigningKeyStatus(models.TextChoices):
    ACTIVE = "active"  # signs new requests; published
    RETIRING = "retiring"  # published, no longer signs; kept ≥ 30 days
    RETIRED = "retired"  # unpublished; its private half is erased


class SigningKey(models.Model):
    """An Ed25519 key pair. The private half is stored sealed (apps/webhooks/keys.py) and is
    never shown: not by the admin, the API, the commands, nor `repr`."""

    kid = models.CharField(primary_key=True, max_length=40)
    public_key = models.CharField(max_length=64)  # base64url, no padding (the JWK's `x`)
    sealed_private_key = models.BinaryField(editable=False)
    status = models.CharField(max_length=10, choices=SigningKeyStatus.choices)
    created_at = models.DateTimeField()
    retiring_at = models.DateTimeField(null=True, blank=True)
    retired_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            # At most one active key: concurrent "first need" creations cannot both win.
            models.UniqueConstraint(
                fields=["status"], condition=models.Q(status="active"), name="signing_key_one_active"
            )
        ]

    def __repr__(self) -> str:
        return f"<SigningKey {self.kid} {self.status}>"

    def __str__(self) -> str:
        return f"{self.kid} ({self.status})"
