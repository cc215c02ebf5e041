"""clientmetrics.gateway."""
