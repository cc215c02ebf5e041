"""clientmetrics.reporter."""
