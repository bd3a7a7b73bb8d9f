"""The outgoing webhooks' settings: declared by the webhooks module, read by the
delivery code and the worker. (``cmsshop.webhooks.rejected_*`` are the incoming provider
webhooks' settings: docs/payments.md.)"""

from __future__ import annotations

from pyramid.exceptions import ConfigurationError

from cmsshop.services.webhooks.addresses import parse_nameserver
from cmsshop.settings import as_bool, as_float, as_int, as_list, declare

ALLOW_PRIVATE = "cmsshop.webhooks.allow_private_addresses"
RETRY_FOR = "cmsshop.webhooks.retry_for"
NAMESERVERS = "cmsshop.webhooks.nameservers"
KEEP_DAYS = "cmsshop.webhooks.keep_days"
WORKER_THREADS = "cmsshop.webhooks.worker_threads"

SETTINGS = {
    # Endpoints on private, loopback and link-local addresses are refused (when saved and
    # at each delivery, against the DNS answers) unless this is on: development and
    # tests only (production refuses to start with it on).
    ALLOW_PRIVATE: (as_bool, False, "CMSSHOP_WEBHOOKS_ALLOW_PRIVATE_ADDRESSES"),
    # Seconds to connect, and for the whole attempt (connect, send, read the answer).
    "cmsshop.webhooks.connect_timeout": (as_float, 5.0, "CMSSHOP_WEBHOOKS_CONNECT_TIMEOUT"),
    "cmsshop.webhooks.timeout": (as_float, 15.0, "CMSSHOP_WEBHOOKS_TIMEOUT"),
    # The most of an answer read; the rest is not (the console shows an excerpt).
    "cmsshop.webhooks.max_response_bytes": (as_int, 65536, "CMSSHOP_WEBHOOKS_MAX_RESPONSE_BYTES"),
    # Seconds a delivery is retried for (three days), and after which an endpoint that
    # failed all along is disabled and the admins are mailed.
    RETRY_FOR: (as_int, 259200, "CMSSHOP_WEBHOOKS_RETRY_FOR"),
    # Days an event and its delivery log are kept once every delivery of it is done
    # (succeeded or given up); the worker drops older ones hourly.
    KEEP_DAYS: (as_int, 30, "CMSSHOP_WEBHOOKS_KEEP_DAYS"),
    # Deliveries one worker process attempts at once (threads): an endpoint far away
    # answers in a tenth of a second or more, so one at a time would cap a worker at a
    # few deliveries a second; the order of one subject's events holds whatever this is.
    WORKER_THREADS: (as_int, 4, "CMSSHOP_WEBHOOKS_WORKER_THREADS"),
    # Seconds between the worker's passes over due deliveries.
    "cmsshop.webhooks.worker_interval": (as_float, 2.0, "CMSSHOP_WEBHOOKS_WORKER_INTERVAL"),
    # The DNS servers endpoint names are resolved with at delivery ("10.0.0.53",
    # "[2001:db8::53]:5353", separated by spaces); empty: the system resolver.
    NAMESERVERS: (as_list, [], "CMSSHOP_WEBHOOKS_NAMESERVERS"),
}
DEFAULT_RETRY_FOR = SETTINGS[RETRY_FOR][1]


def declare_settings(settings: dict) -> None:
    """Coerce the settings and stop start-up on one that cannot work (not at the first
    delivery, when only the worker's log would say so)."""
    declare(settings, SETTINGS)
    if settings[ALLOW_PRIVATE] and settings["cmsshop.environment"] == "production":
        raise ConfigurationError(
            f"{ALLOW_PRIVATE} is on in production: webhook endpoints could reach this "
            "machine's and its network's private services. Switch it off."
        )
    for name, low in (
        ("connect_timeout", 0.1),
        ("timeout", 0.1),
        ("max_response_bytes", 1024),
        ("retry_for", 60),
        ("worker_interval", 0.1),
        ("keep_days", 1),
    ):
        if settings[f"cmsshop.webhooks.{name}"] < low:
            raise ConfigurationError(f"cmsshop.webhooks.{name} must be at least {low}")
    if not 1 <= settings[WORKER_THREADS] <= 32:
        raise ConfigurationError(f"{WORKER_THREADS} must be 1..32")
    for entry in settings[NAMESERVERS]:
        try:
            parse_nameserver(entry)
        except ValueError as exc:
            raise ConfigurationError(
                f"{NAMESERVERS}: {entry!r} is not an IP address with an optional port"
            ) from exc
