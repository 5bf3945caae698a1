"""Print the hub's byte and character budgets (``bailing.budgets``) as the Markdown of docs/budgets.md."""

from django.core.management.base import BaseCommand

from bailing.budgets import budgets_markdown

HEADER = """# Budgets

Every byte and character budget the hub documents, generated from the code's one table
(`bailing.budgets`; each app declares its own in its `budgets` module) by `manage.py bailing_budgets
--markdown > docs/budgets.md`. A test fails when this file and the code disagree, and the boundary
sweep (`tests/budgets`) exercises each budget at `limit - 1`, `limit` and `limit + 1`
on every path listed. Byte budgets are UTF-8 bytes of compact JSON (`JSON.stringify`) unless the unit
says raw bytes; characters are UTF-16 units unless the unit says code points (docs/protocol.md
"Byte budgets", "Counting characters").

"""


class Command(BaseCommand):
    help = "Print every budget the hub declares (key, limit, unit, what it bounds, what happens past it)."

    def add_arguments(self, parser):
        parser.add_argument(
            "--markdown", action="store_true", help="the whole of docs/budgets.md (with its heading)"
        )

    def handle(self, *args, **options):
        self.stdout.write((HEADER if options["markdown"] else "") + budgets_markdown(), ending="")
