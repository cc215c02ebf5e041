"""Peers for the exporters run of bench/ingest.py: an OTLP/HTTP sink, Tansu, a scraper."""

from __future__ import annotations

import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager

from ports import TansuProcess, free_port, stop_process, wait_port

#: A threaded OTLP/HTTP receiver answering 200 to every POST (body read, not decoded).
_SINK = """
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()
    def log_message(self, *a):
        pass

ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), H).serve_forever()
"""


@contextmanager
def otlp_sink() -> Iterator[str]:
    """An OTLP endpoint URL for as long as the context lasts."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", _SINK, str(port)])
    try:
        wait_port(port)
        yield f"http://127.0.0.1:{port}/v1/metrics"
    finally:
        stop_process(proc, 10)


@contextmanager
def tansu() -> Iterator[str]:
    """A Tansu broker's bootstrap address (memory storage)."""
    broker = TansuProcess().start()
    try:
        yield broker.bootstrap
    finally:
        broker.stop()


@contextmanager
def scraper(url: str, every_s: float = 1.0) -> Iterator[list[int]]:
    """Scrape ``url`` every ``every_s`` like Prometheus would; yields the body sizes."""
    sizes: list[int] = []
    stop = threading.Event()

    def run() -> None:
        while not stop.wait(every_s):
            try:
                with urllib.request.urlopen(url, timeout=10) as r:
                    sizes.append(len(r.read()))
            except OSError:
                sizes.append(-1)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield sizes
    finally:
        stop.set()
        thread.join(15)


def exporters_toml(otlp_url: str, bootstrap: str, prometheus_port: int, only: str) -> str:
    """The exporters named in ``only`` (all three by default) on, beside landing."""
    tables = {
        "prometheus": f"[exporters.prometheus]\nlisten = '127.0.0.1:{prometheus_port}'\n",
        "otlp": f"[exporters.otlp]\nendpoint = '{otlp_url}'\n",
        "topic": f"[exporters.topic]\nbootstrap_servers = '{bootstrap}'\n",
    }
    return "".join(tables[name] for name in only.split(","))
