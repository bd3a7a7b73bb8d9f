"""cmsshop-admin subcommands of the licensing area: the local lease signing keys.

cmsshop-admin production.ini gen-signing-key        # add a key; it signs from now on
cmsshop-admin production.ini list-signing-keys      # newest (signing) first
cmsshop-admin production.ini retire-signing-key KID # drop an old key from the JWKS
cmsshop-admin production.ini remind-expiring [--days N]  # queue licence-expiring e-mails
"""

from __future__ import annotations

import argparse
import json
import sys

from pyramid.paster import get_appsettings

from cmsshop.settings import declare, load_settings


def _key_dir(ini: str) -> str:
    from cmsshop.modules.licensing import SETTINGS

    settings = declare(load_settings(get_appsettings(ini, name="main")), SETTINGS)
    if settings["cmsshop.license_signer"] != "local":
        print(
            "note: cmsshop.license_signer is not `local`; these keys are not used to sign",
            file=sys.stderr,
        )
    return settings["cmsshop.license_key_dir"]


def cmd_gen_signing_key(env, args) -> int:
    """Write a new Ed25519 key into the key directory; it becomes the signing key."""
    from cmsshop.services.licensing.signing import generate_signing_key

    key_dir = _key_dir(args.ini)
    path, kid = generate_signing_key(key_dir)
    print(f"created {path}")
    print(f"kid {kid}")
    print(
        "It signs new leases now; older keys stay in /api/license/jwks.json until retired. "
        "Ship the new JWKS in your products' pinned key set before retiring old keys."
    )
    return 0


def cmd_list_signing_keys(env, args) -> int:
    from cmsshop.services.licensing.signing import list_signing_keys

    keys = list_signing_keys(_key_dir(args.ini))
    if not keys:
        print("no signing keys", file=sys.stderr)
        return 1
    print(json.dumps(keys, indent=2))
    return 0


def cmd_retire_signing_key(env, args) -> int:
    """Move a key to <key dir>/retired/: it leaves the JWKS and signs nothing more."""
    from cmsshop.services.licensing.signing import retire_signing_key

    try:
        target = retire_signing_key(_key_dir(args.ini), args.kid)
    except (LookupError, ValueError) as exc:
        print(str(exc), file=sys.stderr)
        return 1
    print(f"retired to {target}")
    return 0


def cmd_remind_expiring(env, args) -> int:
    """One pass: queue ``license_expiring`` for every active license expiring within the
    next N days (each license and expiry date once; see services/licensing/reminders)."""
    from cmsshop.services.licensing.reminders import queue_expiry_reminders, reminder_days

    settings = env["registry"].settings
    days = args.days if args.days is not None else reminder_days(settings)
    request = env["request"]
    with request.tm:
        queued = queue_expiry_reminders(request.db, settings, days=days)
    print(
        f"queued {queued} license expiry reminder{'' if queued == 1 else 's'} ({days} days ahead)"
    )
    return 0


def positive_days(raw: str) -> int:
    try:
        days = int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number of days: {raw!r}") from None
    if not 1 <= days <= 3650:
        raise argparse.ArgumentTypeError("days must be between 1 and 3650")
    return days


def register(subparsers) -> None:
    """Add this area's subcommands to the cmsshop-admin parser."""
    p = subparsers.add_parser("gen-signing-key", help="add a lease signing key (newest signs)")
    p.set_defaults(handler=cmd_gen_signing_key, needs_app=False)

    p = subparsers.add_parser("list-signing-keys", help="list the lease signing keys")
    p.set_defaults(handler=cmd_list_signing_keys, needs_app=False)

    p = subparsers.add_parser("retire-signing-key", help="remove an old key from the JWKS")
    p.add_argument(
        "kid",
        help="the key's kid or file name (see list-signing-keys); write `-- KID` when the "
        "kid starts with a dash",
    )
    p.set_defaults(handler=cmd_retire_signing_key, needs_app=False)

    p = subparsers.add_parser(
        "remind-expiring", help="queue e-mails for licenses expiring soon (one pass)"
    )
    p.add_argument(
        "--days",
        type=positive_days,
        default=None,
        help="look this many days ahead (default: cmsshop.mail.expiry_reminder_days, 14)",
    )
    p.set_defaults(handler=cmd_remind_expiring)
