"""clientmetrics.pipeline."""
