"""clientmetrics.exporters: receiver plugins for accepted pushes."""

from clientmetrics.exporters.base import Exporter, ExportError, HealthReporting
from clientmetrics.exporters.landing import LandingExporter, LandingStats
from clientmetrics.exporters.landing_files import SCHEMA as LANDING_SCHEMA
from clientmetrics.exporters.landing_options import LandingOptions
from clientmetrics.exporters.memory import InMemoryExporter
from clientmetrics.exporters.path import ExportPath
from clientmetrics.exporters.queued import ExporterStats, QueuedExporter, QueueOptions, Sink
from clientmetrics.exporters.registry import check_exporter, load_exporter, load_exporters

__all__ = [
    "LANDING_SCHEMA",
    "ExportError",
    "ExportPath",
    "Exporter",
    "ExporterStats",
    "HealthReporting",
    "InMemoryExporter",
    "LandingExporter",
    "LandingOptions",
    "LandingStats",
    "QueueOptions",
    "QueuedExporter",
    "Sink",
    "check_exporter",
    "load_exporter",
    "load_exporters",
]
