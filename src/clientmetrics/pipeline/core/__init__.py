"""The pipeline's rules, in pure Arrow: the one home of each.

Nothing here imports pyspark (a test walks the imports), reads or writes a
file, or looks at the wall clock. The Spark shell (``pipeline.spark``) runs
``batch.process_group`` over whole client instances and moves its rows; the
dashboard imports the same rules for what it computes from fresh pushes.

* ``schemas`` — every table and state schema (the landing contract first);
* ``decode`` — landed pushes to data points;
* ``series`` — series keys and per-series running values;
* ``rates`` — temporality: cumulative values and per-second rates;
* ``windows`` — event-time windows, closed by the watermark;
* ``clients`` — the inventory, ``silent``, retirement;
* ``alerts`` — alert episodes and the alerts table's events;
* ``rules`` — alert rules, parsed from TOML;
* ``batch`` — one batch's pass over whole instances, in order.
"""
