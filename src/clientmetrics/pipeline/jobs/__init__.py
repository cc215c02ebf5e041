"""The jobs: ``clientmetrics pipeline run|stream`` and the ``spark-submit`` entry point."""
