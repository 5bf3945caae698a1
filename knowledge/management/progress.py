"""The knowledge commands' progress bars: the plumbing's (``bailing.progress``)."""

from bailing.progress import PROGRESS_HELP, add_progress_argument, progress_bar

__all__ = ["PROGRESS_HELP", "add_progress_argument", "progress_bar"]
