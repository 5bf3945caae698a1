"""``python -m demo_business``: run the Demo Shop until interrupted or terminated.

Prints exactly one line, ``demo business system listening on http://HOST:PORT``, once the socket is
bound (with the real port when ``--port 0`` asks the OS for a free one), so a parent process can wait
for it instead of polling.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import Any

from demo_business.app import make_app
from demo_business.config import ConfigError, DemoConfig
from demo_business.server import make_demo_server


def _port(value: str) -> int:
    port = int(value)
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError("port must be between 0 and 65535")
    return port


def _stop(signum: int, frame: Any) -> None:
    # Unwinds serve_forever() in the main thread; the finally block below closes the socket.
    raise SystemExit(0)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m demo_business",
        description="Demo Shop business system (tool provider for Bailing Hub). "
        "Environment: DEMO_TOOL_SECRET (required); DEMO_HUB_URL, DEMO_CLIENT_TOKEN and "
        "DEMO_DECISION_AUTH=bearer|signed (optional, for approvals; see demo_business/config.py).",
    )
    parser.add_argument(
        "--host",
        default=os.environ.get("DEMO_HOST", "127.0.0.1"),
        help="address to listen on (default: DEMO_HOST, else 127.0.0.1)",
    )
    parser.add_argument(
        "--port",
        type=_port,
        default=_port(os.environ.get("DEMO_PORT", "8100")),
        help="port to listen on, 0 for any free one (default: DEMO_PORT, else 8100)",
    )
    parser.add_argument("--access-log", action="store_true", help="log each request to stderr")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        config = DemoConfig.from_env()
    except ConfigError as exc:
        print(f"demo business system: {exc}", file=sys.stderr)
        return 2

    server = make_demo_server(args.host, args.port, make_app(config), access_log=args.access_log)
    host, port = server.server_address[:2]
    signal.signal(signal.SIGTERM, _stop)
    print(f"demo business system listening on http://{host}:{port}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
