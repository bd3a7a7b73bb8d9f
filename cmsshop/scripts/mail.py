"""cmsshop-admin subcommands of the mail area: ``send-mail``.

``send-mail`` makes one pass over the outbox (every message due now) and prints what it
did; the ``worker`` (scripts/worker.py) does the same continuously. Both deliver through
the backend the settings name (services/mail/delivery.py) and may run beside each other
and beside other senders (services/mail/sender.py keeps each message to one).
"""

from __future__ import annotations

from cmsshop.services.mail.delivery import make_mail_backend
from cmsshop.services.mail.sender import send_due


def cmd_send_mail(env, args) -> int:
    registry = env["registry"]
    settings = registry.settings
    report = send_due(
        registry["cmsshop.engine"], make_mail_backend(settings), settings, limit=args.limit
    )
    print(f"mail: {report}")
    return 0


def register(sub) -> None:
    p = sub.add_parser("send-mail", help="deliver the outbox's due messages once")
    p.add_argument("--limit", type=int, default=None, help="at most this many messages")
    p.set_defaults(handler=cmd_send_mail)
