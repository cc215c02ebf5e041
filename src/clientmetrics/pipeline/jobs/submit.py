"""The ``spark-submit`` entry point: ``spark-submit … submit.py run|stream [options]``.

Takes the same options as ``clientmetrics pipeline``; the master comes from
spark-submit unless ``--master`` is given.
"""

from __future__ import annotations

from clientmetrics.pipeline.cli import pipeline

if __name__ == "__main__":
    pipeline(prog_name="clientmetrics pipeline")
