"""clientmetrics.telemetry."""
