"""``python -m agent_client``: the reference agent client's command line."""

import sys

from agent_client import main

sys.exit(main())
