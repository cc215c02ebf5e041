"""clientmetrics.demo: ``clientmetrics demo``, everything running together on one machine.

A standalone gateway, a subscription set through the admin API, real
confluent-kafka clients and simulated ones (one unhealthy), the Spark pipeline in
streaming mode and the dashboard; a summary at the end.
"""

from clientmetrics.demo.children import Child, DemoError
from clientmetrics.demo.cli import demo
from clientmetrics.demo.run import Demo, DemoOptions
from clientmetrics.demo.summary import DemoSummary, summarise

__all__ = ["Child", "Demo", "DemoError", "DemoOptions", "DemoSummary", "demo", "summarise"]
