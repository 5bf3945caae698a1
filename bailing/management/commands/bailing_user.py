"""``manage.py bailing_user``: console users for scripts, through the same service as the Users page.

    bailing_user create USERNAME [--role administrator|approver|auditor ...] [--password-stdin]
    bailing_user set-roles USERNAME [--role ...]          (no --role: no roles)
    bailing_user reset-password USERNAME [--password-stdin]
    bailing_user deactivate USERNAME
    bailing_user reactivate USERNAME

The last active administrator keeps the role and stays active (``last_administrator``): make someone
else an administrator first. A refusal exits non-zero with its stable code first on the line.

A password is never an argument (it would land in the shell history and the process list): with
``--password-stdin`` it is read from standard input (first line), otherwise one is generated and
printed once on standard output. Every change is audited as the system actor ``bailing_user``.
"""

from __future__ import annotations

import sys

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from bailing.audit.actor import Actor
from bailing.shell.users import (
    ROLES,
    UserError,
    password_generate,
    user_create,
    user_deactivate,
    user_reactivate,
    user_roles,
    user_set_password,
    user_set_roles,
)

ACTOR = Actor.system("bailing_user")


class Command(BaseCommand):
    help = (
        "Create console users, set their roles, reset passwords, deactivate and reactivate them "
        "(passwords never on argv)."
    )

    ACTIONS = {
        "create": "create a user (password from --password-stdin, or generated and printed once)",
        "set-roles": "give a user exactly the --role options given (none: no roles)",
        "reset-password": "set a new password (from --password-stdin, or generated and printed once)",
        "deactivate": "stop a user from signing in (never the last active administrator)",
        "reactivate": "let a deactivated user sign in again (same roles, same password)",
    }

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True, help="what to do")
        for name, summary in self.ACTIONS.items():
            command = sub.add_parser(name, help=summary, description=summary)
            command.add_argument("username", help="the console user's username")
            if name in ("create", "set-roles"):
                command.add_argument(
                    "--role",
                    action="append",
                    default=[],
                    choices=ROLES,
                    dest="roles",
                    help=f"a role to hold ({', '.join(ROLES)}); repeat for several",
                )
            if name in ("create", "reset-password"):
                command.add_argument(
                    "--password-stdin", action="store_true", help="read the password from standard input"
                )

    def _password(self, options) -> tuple[str, bool]:
        if options.get("password_stdin"):
            password = sys.stdin.readline().rstrip("\r\n")
            if not password:
                raise CommandError("no password on standard input")
            return password, False
        return password_generate(), True

    def _user(self, username):
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"no user named {username!r}")
        return user

    def handle(self, *args, **options):
        action, username = options["action"], options["username"]
        try:
            if action == "create":
                password, generated = self._password(options)
                user = user_create(username=username, roles=options["roles"], password=password, actor=ACTOR)
                self.stderr.write(
                    f"created {user.username} with roles: {', '.join(user_roles(user)) or 'none'}"
                )
                if generated:
                    self.stdout.write(password)
            elif action == "set-roles":
                user = self._user(username)
                changed = user_set_roles(user=user, roles=options["roles"], actor=ACTOR)
                roles = ", ".join(user_roles(user)) or "none"
                self.stderr.write(f"{user.username}: roles {roles}" + ("" if changed else " (unchanged)"))
            elif action == "reset-password":
                user = self._user(username)
                password, generated = self._password(options)
                user_set_password(user=user, password=password, actor=ACTOR, generated=generated)
                self.stderr.write(f"password of {user.username} set")
                if generated:
                    self.stdout.write(password)
            elif action == "deactivate":
                user = self._user(username)
                changed = user_deactivate(user=user, actor=ACTOR)
                self.stderr.write(f"{user.username} deactivated" + ("" if changed else " (already)"))
            else:
                user = self._user(username)
                changed = user_reactivate(user=user, actor=ACTOR)
                self.stderr.write(f"{user.username} reactivated" + ("" if changed else " (already active)"))
        except UserError as exc:
            raise CommandError(f"{exc.code} ({exc.field}): {exc.message}") from None
