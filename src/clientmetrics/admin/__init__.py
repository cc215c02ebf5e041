"""clientmetrics.admin."""
