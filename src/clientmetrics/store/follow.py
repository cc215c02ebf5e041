"""Whether a long-polling librdkafka consumer is still fetching, from its statistics.

A consumer following a topic sends one fetch per ``fetch.wait.max.ms`` at least
(the broker answers it when a record arrives or the wait ends). librdkafka's
statistics, emitted every ``statistics.interval.ms`` (set to the fetch wait) by
the thread that polls, count the fetches sent; two intervals in a row without a
new fetch, or a partition not in the ``active`` fetch state, mean the follower
stopped (as a partition assigned before librdkafka knew its leader can: it then
waits for the next metadata refresh, minutes away). The follower then assigns its
partitions again. This costs the cluster no request.
"""

from __future__ import annotations

import json

#: Intervals in a row without a new fetch before the follower is called stuck.
QUIET_INTERVALS = 2


class FetchWatch:
    """``update`` is librdkafka's ``stats_cb``; ``stuck`` says the follower stopped."""

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.stuck = False
        self._fetches = -1
        self._quiet = 0

    def update(self, text: str) -> None:
        """Read one statistics document (on the polling thread)."""
        try:
            stats = json.loads(text)
            fetches = sum(int(b["req"].get("Fetch", 0)) for b in stats["brokers"].values())
            partitions = stats["topics"].get(self.topic, {}).get("partitions", {})
            states = [p["fetch_state"] for key, p in partitions.items() if key != "-1"]
        except (ValueError, KeyError, TypeError, AttributeError):
            return
        fetching = fetches > self._fetches and bool(states) and set(states) == {"active"}
        self._fetches = fetches
        self._quiet = 0 if fetching else self._quiet + 1
        if self._quiet >= QUIET_INTERVALS:
            self.stuck = True
            self._quiet = 0
