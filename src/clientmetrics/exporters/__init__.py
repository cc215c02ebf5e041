"""clientmetrics.exporters."""
