"""Announcing new alerts to incident tools: a JSON-lines file and an optional webhook."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import structlog

from clientmetrics.pipeline.core.alerts import alert_json

_log = structlog.get_logger(__name__)


class AlertNotifier:
    """Appends alert events to a JSON-lines file and POSTs them to a webhook."""

    def __init__(self, sink: str | None, webhook: str | None, timeout: float = 5.0) -> None:
        self._sink = Path(sink) if sink else None
        self._webhook = webhook
        self._timeout = timeout

    def notify(self, events: Sequence[dict[str, Any]]) -> None:
        """Announce a batch of alert events. A failing webhook is logged, never fatal."""
        self.notify_lines([alert_json(event) for event in events])

    def notify_lines(self, lines: Sequence[str]) -> None:
        """Announce alert events already written as JSON lines (``core.alerts.event_lines``)."""
        if not lines:
            return
        if self._sink is not None:
            self._sink.parent.mkdir(parents=True, exist_ok=True)
            with self._sink.open("a", encoding="utf-8") as sink:
                sink.write("".join(line + "\n" for line in lines))
        if self._webhook:
            self._post(lines)

    def _post(self, lines: Sequence[str]) -> None:
        assert self._webhook is not None
        body = ("[" + ",".join(lines) + "]").encode("utf-8")
        request = urllib.request.Request(
            self._webhook,
            data=body,
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=self._timeout) as response:
                response.read()
        except (urllib.error.URLError, OSError) as exc:
            # The alert is in the table and the sink file; the webhook is best effort.
            _log.warning("alert webhook failed", url=self._webhook, error=str(exc))
