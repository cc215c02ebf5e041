"""``python -m clientmetrics.admin``: the ``kafka-client-metrics`` tool."""

import sys

from clientmetrics.admin.cli import main

sys.exit(main())
