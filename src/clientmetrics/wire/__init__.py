"""clientmetrics.wire."""
