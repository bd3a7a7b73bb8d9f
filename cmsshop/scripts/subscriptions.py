"""cmsshop-admin subcommands of the subscriptions area.

``remind-renewals [--days N]`` queues a reminder before each subscription of a long cycle
(three months or more) renews itself, saying when the card on file expires before that
(services/subscriptions/reminders.py).

``reconcile-subscriptions [--all]`` compares every live subscription and those ended
in the last 31 days (every one with ``--all``) with the provider's account of it and
repairs the drift: paid invoices whose events never arrived are recorded, each once,
and the status is the provider's again (services/subscriptions/reconcile.py). Then
every parked payment (a subscription payment whose event named no subscription) is
tried again: recorded, or reported as still parked on stderr. It prints one line per
change and exits 1 when a provider could not be asked, so a scheduler notices.
"""

from __future__ import annotations

import sys

from cmsshop.services.payments.registry import PaymentProviders
from cmsshop.services.subscriptions.reconcile import reconcile_all, reconcile_parked


def cmd_reconcile_subscriptions(env, args) -> int:
    registry = env["registry"]
    providers = env["request"].find_service(PaymentProviders)
    reports = reconcile_all(registry, providers, include_ended=args.all)
    failed = 0
    for report in reports:
        label = f"subscription {report.subscription_id} ({report.provider_ref})"
        if report.error:
            failed += 1
            print(f"{label}: not checked: {report.error}", file=sys.stderr)
        for change in report.changes:
            print(f"{label}: {change}")
    changed = sum(1 for report in reports if report.changes)
    print(f"checked {len(reports) - failed} of {len(reports)} subscriptions; {changed} repaired")
    waiting = 0
    for report in reconcile_parked(registry, providers):
        label = f"parked payment {report.payment_id} ({report.provider})"
        if report.resolved:
            print(f"{label}: {report.note}")
        else:
            waiting += 1
            print(f"{label}: {report.note}", file=sys.stderr)
    if waiting:
        print(f"{waiting} parked payment(s) still match no subscription", file=sys.stderr)
    return 1 if failed else 0


def register(subparsers) -> None:
    """Add this area's subcommands to the cmsshop-admin parser."""
    p = subparsers.add_parser(
        "reconcile-subscriptions",
        help="repair subscriptions from the provider's account of them (one pass)",
    )
    p.add_argument("--all", action="store_true", help="ended subscriptions too")
    p.set_defaults(handler=cmd_reconcile_subscriptions)
    register_reminders(subparsers)


def cmd_remind_renewals(env, args) -> int:
    """One pass: queue ``subscription_renewing`` for every subscription of a long cycle
    renewing within the next N days (services/subscriptions/reminders.py)."""
    from cmsshop.services.subscriptions.reminders import queue_renewal_reminders, reminder_days

    registry = env["registry"]
    days = args.days if args.days is not None else reminder_days(registry.settings)
    providers = env["request"].find_service(PaymentProviders)
    queued = queue_renewal_reminders(registry, providers, days=days)
    print(f"queued {queued} renewal reminder{'' if queued == 1 else 's'} ({days} days ahead)")
    return 0


def register_reminders(subparsers) -> None:
    from cmsshop.scripts.licensing import positive_days

    p = subparsers.add_parser(
        "remind-renewals",
        help="queue e-mails before long subscriptions renew themselves (one pass)",
    )
    p.add_argument("--days", type=positive_days, default=None)
    p.set_defaults(handler=cmd_remind_renewals)
