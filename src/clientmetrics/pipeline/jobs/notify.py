"""Announcing new alerts to incident tools: a JSON-lines file, a webhook and Alertmanager.

Alertmanager gets each event as an incident with KIP-714's labels
(``core.incidents``) through its v2 API (``POST /api/v2/alerts``): firing
events open an incident, resolved ones close it (their ``endsAt``).
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import structlog

from clientmetrics.pipeline.core.alerts import alert_json
from clientmetrics.pipeline.core.brokers import BrokerSweep, HostSweep
from clientmetrics.pipeline.core.incidents import alertmanager_alert, broker_alert, host_alert

_log = structlog.get_logger(__name__)


#: Alerts per request to Alertmanager (a batch of thousands must not be one huge body).
ALERTMANAGER_CHUNK = 500


class AlertNotifier:
    """Appends alert events to a JSON-lines file, POSTs them to a webhook and to Alertmanager."""

    def __init__(
        self,
        sink: str | None,
        webhook: str | None,
        timeout: float = 5.0,
        alertmanager: str | None = None,
    ) -> None:
        self._sink = Path(sink) if sink else None
        self._webhook = webhook
        self._timeout = timeout
        self._alertmanager = alertmanager.rstrip("/") if alertmanager else None
        # One broker slow for many clients is one incident. Its state is the open
        # per-client episodes this notifier has announced (kept in memory).
        self._brokers = BrokerSweep()
        self._hosts = HostSweep()  # and one client slow to every broker is one incident

    def notify(self, events: Sequence[dict[str, Any]]) -> None:
        """Announce a batch of alert events. A failing webhook is logged, never fatal."""
        self.notify_lines([alert_json(event) for event in events])

    def notify_lines(self, lines: Sequence[str]) -> None:
        """Announce alert events already written as JSON lines (``core.alerts.event_lines``)."""
        if not lines:
            return
        events = [json.loads(line) for line in lines]
        brokers = self._brokers.feed(events)
        hosts = self._hosts.feed(events)
        lines = [*lines, *(alert_json(incident) for incident in [*brokers, *hosts])]
        if self._sink is not None:
            self._sink.parent.mkdir(parents=True, exist_ok=True)
            with self._sink.open("a", encoding="utf-8") as sink:
                sink.write("".join(line + "\n" for line in lines))
        if self._webhook:
            self._post(self._webhook, ("[" + ",".join(lines) + "]").encode("utf-8"))
        if self._alertmanager:
            incidents = [alertmanager_alert(event) for event in events]
            incidents += [broker_alert(incident) for incident in brokers]
            incidents += [host_alert(incident) for incident in hosts]
            for start in range(0, len(incidents), ALERTMANAGER_CHUNK):
                body = json.dumps(incidents[start : start + ALERTMANAGER_CHUNK]).encode("utf-8")
                self._post(f"{self._alertmanager}/api/v2/alerts", body)

    def _post(self, url: str, body: bytes) -> None:
        request = urllib.request.Request(
            url,
            data=body,
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=self._timeout) as response:
                response.read()
        except (urllib.error.URLError, OSError) as exc:
            # The alert is in the table and the sink file; the webhook and
            # Alertmanager are best effort.
            _log.warning("alert delivery failed", url=url, error=str(exc))
