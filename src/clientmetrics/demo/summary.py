"""What the demo achieved, read from the tables and the gateway's counters."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq

from clientmetrics.dashboard.alerts import episodes
from clientmetrics.dashboard.sources import GatewayMetrics
from clientmetrics.dashboard.tables import TableReader

#: The software name the load simulator reports (``clientmetrics simulate``).
SIMULATOR_SOFTWARE = "clientmetrics-simulator"


@dataclass(frozen=True, slots=True)
class DemoSummary:
    """The figures the demo prints at the end."""

    clients_seen: int
    real_clients: int
    simulated_clients: int
    pushes_accepted: int
    data_points: int
    alerts: int
    open_alerts: int
    alerted_clients: tuple[str, ...]
    #: Where the dashboard was served while the demo ran (it stops with the demo).
    dashboard_url: str
    data_dir: str

    def lines(self) -> list[str]:
        """The summary as aligned ``name: value`` lines."""
        rows = [
            (
                "clients seen",
                f"{self.clients_seen} ({self.real_clients} real librdkafka, "
                f"{self.simulated_clients} simulated)",
            ),
            ("pushes accepted", str(self.pushes_accepted)),
            ("data points", str(self.data_points)),
            ("alerts", f"{self.alerts} ({self.open_alerts} open)"),
            ("alerted clients", ", ".join(self.alerted_clients) or "-"),
            # Printed after everything stopped: the address no longer answers, and the
            # demo's last line says how to serve the dashboard again.
            ("dashboard", f"stopped (was {self.dashboard_url})" if self.dashboard_url else "-"),
            ("data directory", self.data_dir),
        ]
        return [f"{name:>16}: {value}" for name, value in rows]

    def as_dict(self) -> dict[str, object]:
        """The summary as JSON-ready data."""
        return asdict(self)


def _count_rows(reader: TableReader, table: str) -> int:
    total = 0
    for path, _mtime, _size in reader.list_files(table).signatures:
        try:
            total += pq.ParquetFile(path).metadata.num_rows
        except (OSError, ValueError):
            continue  # replaced while we looked
    return total


def summarise(data_dir: Path, metrics_url: str, dashboard_url: str) -> DemoSummary:
    """Read the figures now (the gateway must still be running for ``pushes_accepted``)."""
    reader = TableReader(data_dir / "tables")
    clients = reader.read("clients", ["client_instance_id", "client_software_name", "client_id"])
    real = simulated = seen = 0
    names: dict[str, str] = {}
    if clients is not None:
        seen = len(pc.unique(clients.column("client_instance_id")))
        software = clients.column("client_software_name")
        simulated = pc.sum(pc.equal(software, SIMULATOR_SOFTWARE)).as_py() or 0
        real = seen - simulated
        ids = clients.column("client_instance_id").to_pylist()
        names = dict(zip(ids, clients.column("client_id").to_pylist(), strict=True))
    found = episodes(reader.read("alerts"))
    alerted = sorted({names.get(a.client_instance_id) or a.client_instance_id for a in found})
    sample = GatewayMetrics(metrics_url).sample() if metrics_url else None
    accepted = int(sample.values.get("accepted_pushes_total", 0)) if sample else 0
    return DemoSummary(
        clients_seen=seen,
        real_clients=real,
        simulated_clients=simulated,
        pushes_accepted=accepted,
        data_points=_count_rows(reader, "points"),
        alerts=len(found),
        open_alerts=sum(a.is_open for a in found),
        alerted_clients=tuple(alerted),
        dashboard_url=dashboard_url,
        data_dir=str(data_dir),
    )
