# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The workload rows of the fleet report as madengine's perf.csv, for the dashboards that read madengine's results.

The header is madengine's (``PERF_CSV_HEADER`` in ROCm/madengine ``reporting/update_perf_csv.py``, 29 columns), one
row per host and workload row, hosts by name, rows in the order they ran. madengine has no TIMEOUT status: such a
row is FAILURE here, as madengine writes it. What hydra does not know (docker image, build, data provider) is empty;
``machine_name`` is the inventory host, ``deployment_type`` ``local``, ``tags`` the tags the run selected with.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

import csv
import io
from collections.abc import Iterator, Mapping
from typing import Any

from ansible_collections.continuum.hydra.plugins.module_utils._status import RUN_FAILURE, RUN_TIMEOUT
from ansible_collections.continuum.hydra.plugins.plugin_utils._render._text import printable

FILE_NAME = "perf.csv"
HEADER = ("model", "n_gpus", "nnodes", "gpus_per_node", "training_precision", "pipeline", "args", "tags", "docker_file",
          "base_docker", "docker_sha", "docker_image", "git_commit", "machine_name", "deployment_type", "launcher",
          "gpu_architecture", "performance", "metric", "relative_change", "status", "build_duration", "test_duration",
          "dataname", "data_provider_type", "data_size", "data_download_duration", "build_number",
          "additional_docker_run_options")


def _cell(value: object) -> str:
    return "" if value is None else printable(value, keep="")


def rows(report: Mapping[str, Any]) -> Iterator[dict[str, str]]:
    """perf.csv rows as {column: text}."""
    for host in sorted(report["hosts"]):
        work = report["hosts"][host].get("workload")
        if not isinstance(work, dict):
            continue
        gpus = work.get("gpus")
        for row in work.get("rows") or []:
            out = dict.fromkeys(HEADER, "")
            out.update(model=_cell(row.get("name")), n_gpus=_cell(gpus), nnodes="1", gpus_per_node=_cell(gpus),
                       args=_cell(row.get("args")), tags=",".join(_cell(t) for t in work.get("tags") or []),
                       machine_name=_cell(host), deployment_type="local",
                       gpu_architecture=_cell(row.get("gpu_name") or work.get("gpu_vendor")),
                       performance=_cell(row.get("performance")), metric=_cell(row.get("metric")),
                       status=RUN_FAILURE if row.get("status") == RUN_TIMEOUT else _cell(row.get("status")),
                       test_duration=_cell(row.get("duration_s")))
            yield out


def render(report: Mapping[str, Any]) -> Iterator[str]:
    """perf.csv in pieces: the header, then one line per row."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=HEADER, lineterminator="\n")
    writer.writeheader()
    yield buffer.getvalue()
    for row in rows(report):
        buffer.seek(0)
        buffer.truncate()
        writer.writerow(row)
        yield buffer.getvalue()
