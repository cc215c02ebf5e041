"""The subscriptions a topic store's log amounts to, record by record, the same on every reader.

Every gateway reads the same log in the same order and applies the same rules
here, so all of them agree on which subscriptions are in force: the
compare-and-set on ``base`` (a record computed from a state another record has
replaced is stale), and the subscription cap (a record that would create one
subscription more than ``max_subscriptions`` is refused, whoever wrote it).
"""

from __future__ import annotations

import enum

from clientmetrics.store.records import Decoded, Reason


class Outcome(enum.Enum):
    """What applying one usable record did."""

    APPLIED = "applied"
    #: Lost a compare-and-set: computed from a state another record replaced.
    STALE = "stale"
    #: Would create a subscription over the cap (``Reason.OVER_CAP``).
    OVER_CAP = "over_cap"


class LogState:
    """name -> configs as of the records applied so far, and the offset of each name's last."""

    def __init__(self, max_subscriptions: int | None = None) -> None:
        self.configs: dict[str, dict[str, str]] = {}
        #: name -> offset of the last record applied for it (deletions included).
        self.versions: dict[str, int] = {}
        self._cap = max_subscriptions

    def apply(self, record: Decoded, offset: int) -> Outcome:
        """Apply ``record`` (read at ``offset``) if its compare-and-set and the cap allow."""
        name, base = record.name, record.base
        last = self.versions.get(name)
        # A name's first record seen is accepted whatever its base: the ones before it
        # may have been compacted away. A record without base is applied as it stands.
        if base is not None and last is not None and base != last:
            return Outcome.STALE
        creates = bool(record.configs) and name not in self.configs
        if creates and self._cap is not None and len(self.configs) >= self._cap:
            return Outcome.OVER_CAP
        self.versions[name] = offset
        if record.configs:
            self.configs[name] = dict(record.configs)
        else:
            self.configs.pop(name, None)
        return Outcome.APPLIED


#: The refusal an outcome counts as, if any (a lost compare-and-set is no refusal:
#: racing alters produce it, and their writers retry).
REFUSAL = {Outcome.OVER_CAP: Reason.OVER_CAP}
