"""Delivering outgoing webhooks: the worker's side of the outbox (events.py writes it).

``deliver_due`` takes one due pending delivery at a time, attempts it, records the
attempt, and takes the next, until none is due (or ``limit``/``stop``). Any number of
workers may run at once; each delivery is kept to one of them by a claim:

1. a short transaction sets ``locked_until`` (now plus a lease longer than an attempt
   can last) on one due delivery whose claim is free: on PostgreSQL the delivery is
   chosen with ``SELECT ... FOR UPDATE SKIP LOCKED LIMIT 1`` (two workers choose
   different ones); on SQLite (one writer) a conditional ``UPDATE ... WHERE
   locked_until IS NULL OR locked_until < now`` that changed no row means another
   worker won it. What the attempt needs is read right after;
2. the HTTP attempt runs outside any transaction (a slow endpoint holds no lock);
3. a second short transaction writes the WebhookAttempt and the delivery's new state,
   and only if the claim is still this worker's (a redelivery asked for meanwhile wins).

A worker killed mid-attempt leaves the claim to expire: the delivery is attempted again
by a later pass. Delivery is therefore at least once; receivers deduplicate on the
event id (the body's ``id`` and the ``Cmsshop-Event-Id`` header).

Order: a delivery is due only when no earlier delivery (lower id) of the same endpoint
and subject is still pending, so ``license.created`` reaches an endpoint before that
licence's ``license.revoked``, while other subjects are not held up.

Retries: any answer but a 2xx, a network error, a timeout or a refused address is a
failure; the next attempt comes after BACKOFF_SECONDS (with jitter) until the
delivery's window ends (``retry_until``, or ``created_at`` plus
``cmsshop.webhooks.retry_for``), the last attempt at its end; then it is ``failed``.

Endpoint health: ``failing_since`` is set by a failure after a success and cleared by a
success; a failure when the endpoint has failed for the whole retry window disables it,
fails its pending deliveries and mails every admin, in the attempt's transaction. A
disabled endpoint's pending deliveries fail at the start of the next pass (nothing is
sent; an admin redelivers what matters after enabling it again); a deleted endpoint's
deliveries are deleted with it.

Manual redelivery (``redeliver``) makes a delivery pending, due now, with no attempts
yet and an explicit ``retry_until`` (a fresh window). Deliveries written by
``emit_event`` never have an explicit ``retry_until`` before their first attempt, so
"no attempts yet and ``retry_until`` set" is what marks the next attempt ``manual`` in
the log, without a column of its own.

The SSRF guard (addresses.py) runs at each attempt: the host is resolved then, every
answer checked (unless ``cmsshop.webhooks.allow_private_addresses``), and the
connection goes to a checked address -- no second lookup -- with the Host header and
TLS (SNI, certificate) still on the name.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import logging
import random
import threading
import time
from collections.abc import Callable

import urllib3
from sqlalchemy import delete, exists, or_, select, update
from sqlalchemy.orm import Session, aliased
from urllib3.exceptions import ConnectTimeoutError, NewConnectionError

from cmsshop import crypto
from cmsshop.db import take_write_lock
from cmsshop.models import (
    TEST_EVENT_TYPE,
    User,
    WebhookAttempt,
    WebhookDelivery,
    WebhookEndpoint,
    WebhookEvent,
)
from cmsshop.services.mail.outbox import enqueue
from cmsshop.services.webhooks import addresses, signing
from cmsshop.services.webhooks.events import event_body
from cmsshop.services.webhooks.settings import DEFAULT_RETRY_FOR, KEEP_DAYS
from cmsshop.util import utcnow

log = logging.getLogger("cmsshop.webhooks")

USER_AGENT = "cmsshop-webhooks/1"
EVENT_ID_HEADER = "Cmsshop-Event-Id"
EVENT_TYPE_HEADER = "Cmsshop-Event-Type"
# Seconds before attempt n+1 after n failures (the last step repeats), each +-JITTER so
# deliveries that failed together (an endpoint down) do not all come back together.
BACKOFF_SECONDS = (30, 120, 600, 1800, 3600, 7200, 5 * 3600)
JITTER = 0.2
EXCERPT_CHARS = 1000
# A claim outlives the longest attempt (DNS, connect, the whole deadline) by this much.
LEASE_MARGIN = dt.timedelta(seconds=60)
READ_CHUNK = 16384


class EndpointDisabled(Exception):
    """A redelivery to an endpoint that is disabled: enable it first."""


@dataclasses.dataclass
class DeliveryReport:
    """One pass: deliveries that succeeded, will be retried, failed (given up), and
    pending deliveries of disabled endpoints failed without an attempt."""

    succeeded: int = 0
    retried: int = 0
    failed: int = 0
    abandoned: int = 0

    @property
    def attempted(self) -> int:
        return self.succeeded + self.retried + self.failed

    def __str__(self) -> str:
        text = f"{self.succeeded} delivered, {self.retried} to retry, {self.failed} failed"
        return text + (f", {self.abandoned} of disabled endpoints" if self.abandoned else "")


@dataclasses.dataclass(frozen=True)
class Job:
    """A claimed delivery: what its attempt needs, read in the claim's transaction."""

    delivery_id: int
    claim: dt.datetime
    manual: bool
    url: str
    event_public_id: str
    event_type: str
    body: bytes
    signing_secrets: tuple[str, ...] | None  # None: they could not be decrypted


@dataclasses.dataclass
class Result:
    """What one attempt came to (WebhookAttempt's fields)."""

    outcome: str
    status_code: int | None = None
    latency_ms: int = 0
    excerpt: str = ""
    error: str | None = None

    @property
    def succeeded(self) -> bool:
        return self.outcome == "succeeded"


def request_body(event: WebhookEvent) -> bytes:
    """The bytes POSTed for ``event``: compact JSON, the same on every attempt."""
    return json.dumps(event_body(event), separators=(",", ":"), ensure_ascii=False).encode()


def backoff(attempts: int, rng: Callable[[], float] = random.random) -> dt.timedelta:
    """How long to wait after the ``attempts``-th failure (1-based), with jitter."""
    base = BACKOFF_SECONDS[min(max(attempts, 1), len(BACKOFF_SECONDS)) - 1]
    return dt.timedelta(seconds=base * (1 + JITTER * (2 * rng() - 1)))


def retry_window_end(delivery: WebhookDelivery, settings) -> dt.datetime:
    if delivery.retry_until is not None:
        return delivery.retry_until
    return delivery.created_at + dt.timedelta(seconds=settings["cmsshop.webhooks.retry_for"])


def lease(settings) -> dt.timedelta:
    seconds = settings["cmsshop.webhooks.connect_timeout"] + settings["cmsshop.webhooks.timeout"]
    return dt.timedelta(seconds=seconds) + LEASE_MARGIN


# -- claiming -----------------------------------------------------------------------


def _due_query(now: dt.datetime):
    earlier = aliased(WebhookDelivery)
    held_back = exists().where(
        earlier.endpoint_id == WebhookDelivery.endpoint_id,
        earlier.subject == WebhookDelivery.subject,
        earlier.id < WebhookDelivery.id,
        earlier.status == "pending",
    )
    return (
        select(WebhookDelivery.id)
        .join(WebhookEndpoint, WebhookEndpoint.id == WebhookDelivery.endpoint_id)
        .join(WebhookEvent, WebhookEvent.id == WebhookDelivery.event_id)
        .where(
            WebhookDelivery.status == "pending",
            WebhookDelivery.next_attempt_at <= now,
            _unclaimed(now),
            # A disabled endpoint still gets the test event its seller sends it (to check
            # the server works again before enabling it); nothing else.
            or_(WebhookEndpoint.enabled.is_(True), WebhookEvent.type == TEST_EVENT_TYPE),
            ~held_back,
        )
        .order_by(WebhookDelivery.next_attempt_at, WebhookDelivery.id)
    )


def _unclaimed(now: dt.datetime):
    return or_(WebhookDelivery.locked_until.is_(None), WebhookDelivery.locked_until < now)


def _signing_secrets(endpoint: WebhookEndpoint, settings, now) -> tuple[str, ...] | None:
    server_secret = settings["cmsshop.secret"]
    try:
        found = [signing.decrypt_secret(server_secret, endpoint.secret_encrypted)]
        if (
            endpoint.previous_secret_encrypted
            and endpoint.previous_secret_expires_at is not None
            and endpoint.previous_secret_expires_at > now
        ):
            found.append(signing.decrypt_secret(server_secret, endpoint.previous_secret_encrypted))
    except crypto.InvalidToken:  # the server secret changed since it was stored
        return None
    return tuple(found)


def _claim_id(factory, now: dt.datetime, claim: dt.datetime) -> int | None:
    """Set ``locked_until`` on one due delivery; its id, or None when none is due."""
    with factory() as session:
        postgresql = session.get_bind().dialect.name == "postgresql"
    if postgresql:
        with factory() as session, session.begin():
            delivery_id = session.scalar(
                _due_query(now).limit(1).with_for_update(skip_locked=True, of=WebhookDelivery)
            )
            if delivery_id is not None:
                session.execute(
                    update(WebhookDelivery)
                    .where(WebhookDelivery.id == delivery_id)
                    .values(locked_until=claim)
                    .execution_options(synchronize_session=False)
                )
            return delivery_id
    while True:
        with factory() as session, session.begin():
            delivery_id = session.scalar(_due_query(now).limit(1))
        if delivery_id is None:
            return None
        with factory() as session, session.begin():
            # The first statement of its transaction is this write, so SQLite gives it
            # the write lock (waiting on the busy timeout) instead of failing to upgrade
            # a read snapshot; the claim is checked again under that lock.
            won = session.execute(
                update(WebhookDelivery)
                .where(
                    WebhookDelivery.id == delivery_id,
                    WebhookDelivery.status == "pending",
                    WebhookDelivery.next_attempt_at <= now,
                    _unclaimed(now),
                )
                .values(locked_until=claim)
                .execution_options(synchronize_session=False)
            ).rowcount
        if won == 1:
            return delivery_id
        # Another worker won this one: take the next.


def claim_next(factory, settings, now: dt.datetime) -> Job | None:
    """Claim one due delivery for this worker (see the module's docstring)."""
    claim = now + lease(settings)
    delivery_id = _claim_id(factory, now, claim)
    if delivery_id is None:
        return None
    with factory() as session, session.begin():
        delivery = session.get(WebhookDelivery, delivery_id)
        endpoint = session.get(WebhookEndpoint, delivery.endpoint_id)
        return Job(
            delivery_id=delivery.id,
            claim=claim,
            manual=delivery.attempts == 0 and delivery.retry_until is not None,
            url=endpoint.url,
            event_public_id=delivery.event.public_id,
            event_type=delivery.event.type,
            body=request_body(delivery.event),
            signing_secrets=_signing_secrets(endpoint, settings, now),
        )


def abandon_disabled(factory, now: dt.datetime) -> int:
    """Fail the pending deliveries of disabled endpoints (but their test events); how
    many."""
    abandoned = (
        WebhookDelivery.status == "pending",
        WebhookDelivery.endpoint_id.in_(
            select(WebhookEndpoint.id).where(WebhookEndpoint.enabled.is_(False))
        ),
        WebhookDelivery.event_id.not_in(
            select(WebhookEvent.id).where(WebhookEvent.type == TEST_EVENT_TYPE)
        ),
        _unclaimed(now),
    )
    with factory() as session, session.begin():
        # Read first: an UPDATE would take SQLite's write lock every pass, for nothing
        # almost always.
        if session.scalar(select(WebhookDelivery.id).where(*abandoned).limit(1)) is None:
            return 0
    with factory() as session, session.begin():
        return session.execute(
            update(WebhookDelivery)
            .where(*abandoned)
            .values(status="failed", locked_until=None)
            .execution_options(synchronize_session=False)
        ).rowcount


# Events looked at per statement when old ones are dropped.
PURGE_BATCH = 500


def purge_old_deliveries(registry, now: dt.datetime | None = None) -> int:
    """Drop the events older than ``cmsshop.webhooks.keep_days`` whose deliveries are
    all done (succeeded or given up), with their deliveries and attempt logs; how many
    events. An event still pending anywhere is kept whole."""
    factory = registry["cmsshop.session_factory"]
    before = (now or utcnow()) - dt.timedelta(days=registry.settings[KEEP_DAYS])
    done = WebhookDelivery.status != "pending"
    pending = exists().where(
        WebhookDelivery.event_id == WebhookEvent.id, WebhookDelivery.status == "pending"
    )
    dropped = 0
    while True:
        # Read, then write in a transaction of its own: on SQLite a read snapshot could
        # not become a writer once another worker has written (as abandon_disabled).
        with factory() as session, session.begin():
            ids = list(
                session.scalars(
                    select(WebhookEvent.id)
                    .where(WebhookEvent.created_at < before, ~pending)
                    .order_by(WebhookEvent.id)
                    .limit(PURGE_BATCH)
                )
            )
        if not ids:
            return dropped
        with factory() as session, session.begin():
            ours = select(WebhookDelivery.id).where(WebhookDelivery.event_id.in_(ids), done)
            session.execute(delete(WebhookAttempt).where(WebhookAttempt.delivery_id.in_(ours)))
            session.execute(delete(WebhookDelivery).where(WebhookDelivery.event_id.in_(ids), done))
            # A delivery made pending again meanwhile (a redelivery) keeps its event.
            kept = exists().where(WebhookDelivery.event_id == WebhookEvent.id)
            dropped += session.execute(
                delete(WebhookEvent).where(WebhookEvent.id.in_(ids), ~kept)
            ).rowcount
        if len(ids) < PURGE_BATCH:
            return dropped


# -- the HTTP attempt ---------------------------------------------------------------


def _excerpt(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")[:EXCERPT_CHARS]


def _error_text(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return text[:300]


def _pool(scheme: str, address: str, host: str, port: int, timeout: urllib3.Timeout):
    """A one-use connection pool to ``address`` that speaks to ``host``: the checked
    address is connected to, SNI and the certificate check use the name."""
    if scheme == "https":
        return urllib3.HTTPSConnectionPool(
            address,
            port,
            timeout=timeout,
            retries=False,
            maxsize=1,
            cert_reqs="CERT_REQUIRED",
            server_hostname=host,
            assert_hostname=host,
        )
    return urllib3.HTTPConnectionPool(address, port, timeout=timeout, retries=False, maxsize=1)


def _host_header(scheme: str, host: str, port: int) -> str:
    name = f"[{host}]" if ":" in host else host
    default = 443 if scheme == "https" else 80
    return name if port == default else f"{name}:{port}"


def attempt(
    job: Job, settings, resolver: addresses.Resolver, timestamp: int | None = None
) -> Result:
    """POST ``job``'s body to its endpoint once; never raises."""
    started = time.monotonic()

    def result(outcome: str, **fields) -> Result:
        latency = int((time.monotonic() - started) * 1000)
        return Result(outcome, latency_ms=latency, **fields)

    if job.signing_secrets is None:
        return result(
            "network_error", error="the signing secret cannot be decrypted (server secret?)"
        )
    allow_private = settings["cmsshop.webhooks.allow_private_addresses"]
    try:
        host, port, found = addresses.resolve_checked(
            job.url, allow_private=allow_private, resolver=resolver
        )
    except addresses.AddressRefused as exc:
        return result("refused_address", error=str(exc)[:300])
    except addresses.ResolutionFailed as exc:
        return result("network_error", error=str(exc)[:300])
    parts = urllib3.util.parse_url(job.url.strip())
    scheme, path = parts.scheme.lower(), parts.request_uri or "/"
    timestamp = int(time.time()) if timestamp is None else timestamp
    headers = {
        "Host": _host_header(scheme, host, port),
        "Content-Type": "application/json",
        "User-Agent": USER_AGENT,
        signing.SIGNATURE_HEADER: signing.signature_header(
            list(job.signing_secrets), timestamp, job.body
        ),
        EVENT_ID_HEADER: job.event_public_id,
        EVENT_TYPE_HEADER: job.event_type,
    }
    total = settings["cmsshop.webhooks.timeout"]
    deadline = started + total
    cap = settings["cmsshop.webhooks.max_response_bytes"]
    last: Result | None = None
    for address in found:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        timeout = urllib3.Timeout(
            connect=min(settings["cmsshop.webhooks.connect_timeout"], remaining), read=remaining
        )
        pool = _pool(scheme, address, host, port, timeout)
        try:
            try:
                response = pool.urlopen(
                    "POST",
                    path,
                    body=job.body,
                    headers=headers,
                    redirect=False,
                    retries=False,
                    preload_content=False,
                    assert_same_host=False,
                )
            except ConnectTimeoutError as exc:
                # This address does not answer: the next one of the name may. (A refused
                # connection is a NewConnectionError, a subclass of the timeout.)
                refused = isinstance(exc, NewConnectionError)
                outcome = "network_error" if refused else "timeout"
                last = result(outcome, error=_error_text(exc))
                continue
            return _read_answer(response, deadline, cap, result)
        except urllib3.exceptions.TimeoutError as exc:
            return result("timeout", error=_error_text(exc))
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            return result("network_error", error=_error_text(exc))
        finally:
            pool.close()
    return last or result("timeout", error="the deadline passed before a connection")


def _read_answer(response, deadline: float, cap: int, result) -> Result:
    """Read at most ``cap`` bytes of the answer before ``deadline``, then let it go."""
    # A receiver that drips its answer byte by byte would keep each read under the read
    # timeout: the deadline shuts the connection wherever the read is.
    watchdog = threading.Timer(max(0.0, deadline - time.monotonic()), response.shutdown)
    watchdog.daemon = True
    watchdog.start()
    received = bytearray()
    try:
        while len(received) < cap:
            chunk = response.read(min(READ_CHUNK, cap - len(received)))
            if not chunk:
                break
            received += chunk
            if time.monotonic() >= deadline:
                break
        timed_out = time.monotonic() >= deadline
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        if time.monotonic() >= deadline or isinstance(exc, urllib3.exceptions.TimeoutError):
            return result("timeout", status_code=response.status, error="the answer took too long")
        return result("network_error", status_code=response.status, error=_error_text(exc))
    finally:
        watchdog.cancel()
        response.close()  # never drained: the rest of a large answer is not read
    status = response.status
    if timed_out:
        return result(
            "timeout",
            status_code=status,
            excerpt=_excerpt(bytes(received)),
            error="the answer took too long",
        )
    if 200 <= status < 300:
        return result("succeeded", status_code=status, excerpt=_excerpt(bytes(received)))
    error = f"HTTP {status}"
    if 300 <= status < 400:
        error += " (redirects are not followed)"
    return result("http_error", status_code=status, excerpt=_excerpt(bytes(received)), error=error)


# -- recording ------------------------------------------------------------------------


def _admin_addresses(session: Session) -> list[str]:
    return list(
        session.scalars(
            select(User.email)
            .where(User.role == "admin", User.deleted_at.is_(None))
            .order_by(User.id)
        )
    )


def disable_endpoint(session: Session, settings, endpoint: WebhookEndpoint, now, reason: str):
    """Disable ``endpoint``, fail its pending deliveries, and mail every admin, in
    ``session``'s transaction."""
    endpoint.enabled = False
    endpoint.disabled_at = now
    endpoint.disabled_reason = reason[:300]
    session.execute(
        update(WebhookDelivery)
        .where(WebhookDelivery.endpoint_id == endpoint.id, WebhookDelivery.status == "pending")
        .values(status="failed", locked_until=None)
        .execution_options(synchronize_session="fetch")
    )
    base_url = settings["cmsshop.base_url"].rstrip("/")
    for address in _admin_addresses(session):
        enqueue(
            session,
            settings,
            kind="webhook_disabled",
            to=address,
            subject="A webhook endpoint was disabled after failing for days",
            template="webhook_disabled",
            context={
                "endpoint_url": endpoint.url,
                "endpoint_description": endpoint.description or "",
                "failing_since": endpoint.failing_since.strftime("%Y-%m-%d %H:%M UTC")
                if endpoint.failing_since
                else "",
                "reason": endpoint.disabled_reason,
                "endpoint_page": f"{base_url}/admin/webhooks",
            },
            dedupe_key=f"webhook-disabled:{endpoint.id}:{now.isoformat()}:{address}",
        )
    log.warning("webhook endpoint %s disabled: %s", endpoint.id, reason)


def record(
    factory, settings, job: Job, result: Result, started_at: dt.datetime, now: dt.datetime
) -> str:
    """Write ``result`` for ``job``: the attempt, and the delivery's and the endpoint's
    new state (only if the claim is still ours). The delivery's state afterwards."""
    with factory() as session, session.begin():
        take_write_lock(session)
        endpoint_id = session.scalar(
            select(WebhookDelivery.endpoint_id).where(WebhookDelivery.id == job.delivery_id)
        )
        if endpoint_id is None:
            return "gone"  # the endpoint was deleted meanwhile
        # PostgreSQL: one worker at a time decides an endpoint's health. The endpoint is
        # locked before the delivery, as disable_endpoint then updates its deliveries:
        # the other order could deadlock two workers recording for one endpoint.
        endpoint = session.scalars(
            select(WebhookEndpoint).where(WebhookEndpoint.id == endpoint_id).with_for_update()
        ).one()
        session.execute(
            select(WebhookDelivery.id)
            .where(WebhookDelivery.id == job.delivery_id)
            .with_for_update()
        )
        delivery = session.get(WebhookDelivery, job.delivery_id, populate_existing=True)
        if delivery is None:
            return "gone"
        session.add(
            WebhookAttempt(
                delivery_id=delivery.id,
                started_at=started_at,
                outcome=result.outcome,
                status_code=result.status_code,
                latency_ms=result.latency_ms,
                response_excerpt=result.excerpt[:EXCERPT_CHARS],
                error=result.error[:300] if result.error else None,
                manual=job.manual,
            )
        )
        if result.succeeded:
            endpoint.failing_since = None
        elif endpoint.failing_since is None:
            endpoint.failing_since = now
        ours = delivery.status == "pending" and delivery.locked_until == job.claim
        if not ours:
            # A redelivery (or a claim that expired and was taken again) owns the row now.
            return delivery.status
        delivery.locked_until = None
        delivery.last_attempt_at = now
        delivery.last_status_code = result.status_code
        if result.succeeded:
            delivery.status, delivery.delivered_at = "succeeded", now
            return "succeeded"
        delivery.attempts += 1
        window_end = retry_window_end(delivery, settings)
        if now >= window_end:
            delivery.status = "failed"
        else:
            delivery.next_attempt_at = min(now + backoff(delivery.attempts), window_end)
        retry_for = dt.timedelta(seconds=settings["cmsshop.webhooks.retry_for"])
        if endpoint.enabled and now - endpoint.failing_since >= retry_for:
            session.flush()
            disable_endpoint(
                session,
                settings,
                endpoint,
                now,
                f"every delivery failed since {endpoint.failing_since:%Y-%m-%d %H:%M} UTC; "
                f"last: {result.error or result.outcome}",
            )
            session.refresh(delivery)
        return delivery.status


# -- the pass and redelivery ----------------------------------------------------------


def deliver_due(
    registry,
    *,
    limit: int | None = 100,
    now: dt.datetime | None = None,
    stop: Callable[[], bool] | None = None,
    resolver: addresses.Resolver | None = None,
) -> DeliveryReport:
    """One pass: attempt due deliveries, one at a time, until none is due, ``limit``
    were attempted, or ``stop()`` says so (checked between deliveries: the one in
    flight is always finished and recorded). ``now`` fixes the clock (tests)."""
    settings = registry.settings
    factory = registry["cmsshop.session_factory"]
    resolver = resolver or addresses.make_resolver(settings)

    def clock() -> dt.datetime:
        return now or utcnow()

    report = DeliveryReport(abandoned=abandon_disabled(factory, clock()))
    while (limit is None or report.attempted < limit) and not (stop and stop()):
        job = claim_next(factory, settings, clock())
        if job is None:
            break
        started_at = clock()
        result = attempt(job, settings, resolver)
        state = record(factory, settings, job, result, started_at, clock())
        log_attempt(job, result, state)
        if state == "succeeded":
            report.succeeded += 1
        elif state == "pending":
            report.retried += 1
        else:
            report.failed += 1
    return report


def log_attempt(job: Job, result: Result, state: str) -> None:
    """One line per attempt: never the body or a secret."""
    if result.succeeded:
        log.info(
            "webhook %s %s delivered (delivery %s): HTTP %s in %s ms",
            job.event_type,
            job.event_public_id,
            job.delivery_id,
            result.status_code,
            result.latency_ms,
        )
        return
    log.warning(
        "webhook %s %s not delivered (delivery %s, %s): %s; %s",
        job.event_type,
        job.event_public_id,
        job.delivery_id,
        result.outcome,
        result.error,
        "will be retried" if state == "pending" else state,
    )


def redeliver(
    session: Session,
    delivery: WebhookDelivery,
    now: dt.datetime | None = None,
    *,
    retry_for: int | None = None,
) -> WebhookDelivery:
    """Send ``delivery``'s event to its endpoint again, due now, with a fresh retry
    window of ``retry_for`` seconds (pass ``cmsshop.webhooks.retry_for``; its default
    otherwise); its next attempt is logged as manual. In ``session``'s transaction.
    Raises EndpointDisabled when the endpoint is disabled (its deliveries would just
    fail)."""
    now = now or utcnow()
    if retry_for is None:
        retry_for = DEFAULT_RETRY_FOR
    endpoint = delivery.endpoint or session.get(WebhookEndpoint, delivery.endpoint_id)
    if not endpoint.enabled:
        raise EndpointDisabled(endpoint.id)
    delivery.status = "pending"
    delivery.attempts = 0
    delivery.next_attempt_at = now
    delivery.retry_until = now + dt.timedelta(seconds=retry_for)
    delivery.locked_until = None  # a worker attempting it now records, but not its state
    delivery.delivered_at = None
    return delivery
