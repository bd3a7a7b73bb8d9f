"""``cmsshop-admin <ini> <command>``: operator commands.

Each area adds its subcommands through a ``register(subparsers)`` function in a module
listed in COMMAND_MODULES; a subcommand's handler receives ``(env, args)`` where env is
pyramid.paster.bootstrap's environment (registry, request, ...), or ``(None, args)`` when
it sets ``needs_app=False``; one that sets ``announce_ini=True`` prints the ini file in use
first (``using /abs/path/development.ini``).
"""

from __future__ import annotations

import argparse
import getpass
import importlib
import json
import os
import sys

from alembic import command
from alembic.config import Config
from pyramid.exceptions import ConfigurationError
from pyramid.paster import bootstrap, get_appsettings, setup_logging

from cmsshop.settings import load_settings

COMMAND_MODULES = (
    "cmsshop.scripts.payments",
    "cmsshop.scripts.licensing",
    "cmsshop.scripts.mail",
    "cmsshop.scripts.worker",
    "cmsshop.scripts.tax",
    "cmsshop.scripts.subscriptions",
)


# Commands an operator runs to change the shop by hand: their changes are recorded in
# the audit log as the operating-system user's (channel "cli"). The worker, the
# scheduled passes (expiry reminders, sending mail) and the read-only reports act as the
# system and are not an admin's changes.
AUDITED_COMMANDS = frozenset({"create-user", "seed-demo", "simulate-payment"})


def alembic_config(ini: str) -> Config:
    return Config(ini)


def cmd_initdb(env, args) -> int:
    """Migrate the database to the newest schema (alembic upgrade head)."""
    settings = load_settings(get_appsettings(args.ini, name="main"))
    url = settings["cmsshop.database_url"]
    if url.startswith("sqlite:///"):
        import os

        os.makedirs(os.path.dirname(os.path.abspath(url[len("sqlite:///") :])), exist_ok=True)
    command.upgrade(alembic_config(args.ini), "head")
    print("database is at the newest schema")
    return 0


def cmd_create_user(env, args) -> int:
    from cmsshop.services.accounts import users as accounts

    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\n")
    else:
        password = getpass.getpass("Password: ")
        if password != getpass.getpass("Again: "):
            print("passwords differ", file=sys.stderr)
            return 2
    if len(password) < 10:
        print("password must have at least 10 characters", file=sys.stderr)
        return 2
    session = env["request"].db
    try:
        with env["request"].tm:
            user = accounts.create_user(
                session,
                env["request"].find_service(accounts.PasswordHasher),
                args.email,
                password,
                role="admin" if args.admin else "customer",
            )
            print(f"created {user.role} {user.email}")
    except accounts.EmailTaken:
        print(f"{args.email} already exists", file=sys.stderr)
        return 1
    return 0


def cmd_seed_demo(env, args) -> int:
    from cmsshop.services import demo
    from cmsshop.services.accounts.users import PasswordHasher

    settings = env["registry"].settings
    if settings["cmsshop.environment"] == "production":
        print("refusing to load demo data into a production site", file=sys.stderr)
        return 2
    request = env["request"]
    with request.tm:
        if args.if_empty and not demo.is_empty(request.db):
            print("database is not empty; demo data not loaded")
            return 0
        hasher = request.find_service(PasswordHasher)
        for line in demo.seed_demo(request.db, settings, hasher):
            print(line)
    return 0


def cmd_support_code(env, args) -> int:
    from cmsshop.services.support.codes import find_error_record
    from cmsshop.views.shared.bodies import error_record_body

    request = env["request"]
    with request.tm:
        record = find_error_record(request.db, args.code)
        if record is None:
            print(f"no error recorded with support code {args.code}", file=sys.stderr)
            return 1
        body = error_record_body(record)
    traceback_text = body.pop("traceback")
    print(json.dumps(body, indent=2))
    if traceback_text:
        print(traceback_text)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="cmsshop-admin", description=__doc__.split("\n")[0])
    parser.add_argument("ini", help="the app's ini file, e.g. development.ini")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("initdb", help="migrate the database to the newest schema")
    p.set_defaults(handler=cmd_initdb, needs_app=False)

    p = sub.add_parser("create-user", help="create a user (password from a prompt)")
    p.add_argument("email")
    p.add_argument("--admin", action="store_true", help="give the admin role")
    p.add_argument("--password-stdin", action="store_true", help="read the password from stdin")
    p.set_defaults(handler=cmd_create_user)

    p = sub.add_parser("seed-demo", help="load demo data (never in production)")
    p.add_argument("--if-empty", action="store_true", help="only when there are no users yet")
    p.set_defaults(handler=cmd_seed_demo)

    p = sub.add_parser("support-code", help="print the stored record of a server error")
    p.add_argument("code")
    p.set_defaults(handler=cmd_support_code)

    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def ini_in_use(ini: str) -> str:
    """The ini file ``ini`` names, as an absolute path (a PasteDeploy section suffix,
    ``#name``, is kept)."""
    path, hash_mark, section = ini.partition("#")
    return os.path.realpath(path) + hash_mark + section


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if getattr(args, "announce_ini", False):
        # First, before the app starts (or fails to): which file's settings are used.
        print(f"using {ini_in_use(args.ini)}", flush=True)
    setup_logging(args.ini)
    if not getattr(args, "needs_app", True):
        return args.handler(None, args)
    try:
        with bootstrap(args.ini) as env:
            if args.command not in AUDITED_COMMANDS:
                return args.handler(env, args)
            from cmsshop.services.audit import capture

            with capture.acting_as(capture.cli_context(args.command)):
                return args.handler(env, args)
    except ConfigurationError as exc:
        # A setting that cannot work (validated at start-up): say which, without a traceback.
        print(f"configuration error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
