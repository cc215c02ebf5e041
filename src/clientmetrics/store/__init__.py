"""clientmetrics.store."""
