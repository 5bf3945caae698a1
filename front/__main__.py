"""``python -m front``: gunicorn behind the front (front/launcher.py).

It takes no options — the environment configures it, as a service manager sets it — but it answers
``--help`` (and refuses anything else) instead of starting a server by surprise.
"""

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    return argparse.ArgumentParser(
        prog="python -m front",
        description="Run the hub in its production topology: gunicorn on a private unix socket, the "
        "front (a buffering proxy that reads every request whole) on BAILING_BIND (default "
        "127.0.0.1:8000), in the foreground until SIGTERM or Ctrl-C.",
        epilog="Configured by the environment only: BAILING_BIND, GUNICORN_WORKERS, GUNICORN_THREADS, "
        "GUNICORN_TIMEOUT, the BAILING_FRONT_* limits and every hub setting (.env.example, "
        'docs/production.md "Running in production").',
    )


if __name__ == "__main__":
    build_parser().parse_args()

    from front.launcher import main

    sys.exit(main())
