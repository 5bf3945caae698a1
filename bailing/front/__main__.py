"""``python -m bailing.front``: gunicorn behind the front (bailing/front/launcher.py)."""

import sys

from bailing.front.launcher import main

sys.exit(main())
