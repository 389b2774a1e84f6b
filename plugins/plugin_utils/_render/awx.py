# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

"""The fleet summary an AWX / Automation Controller workflow branches on, as ansible.builtin.set_stats data.

Note that this module util is **PRIVATE** to the collection. It can have
breaking changes at any time. Do not use it from other collections or roles.
"""

from collections.abc import Mapping
from typing import Any

from ansible_collections.continuum.hydra.plugins.module_utils._status import WARNING
from ansible_collections.continuum.hydra.plugins.plugin_utils._render import _views as views

STATS_KEY = "hydra_fleet"


def set_stats_data(report: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """{"hydra_fleet": {...}}: counts, failing and warning hosts, failing checks; stragglers and drift when analysed;
    workload counts and failed and straggling hosts when workloads ran."""
    hosts = report["hosts"]
    failing_checks: dict[str, int] = {}
    for check_id, entries in report["failing"].items():
        failing_checks[check_id] = len(entries)
    data: dict[str, Any] = {
        "generated_at": report["generated_at"],
        "totals": dict(report["totals"]),
        "failing_hosts": sorted(h for h, e in hosts.items() if e["status"] in views.PROBLEM_STATUSES),
        "warning_hosts": sorted(h for h, e in hosts.items() if e["status"] == WARNING),
        "failing_checks": failing_checks,
    }
    data["ok"] = not data["failing_hosts"]
    analysis = report.get("analysis")
    if analysis:
        data["straggler_hosts"] = sorted(views.straggler_hosts(report))
        data["drift_hosts"] = sorted(views.drift_hosts(report))
        data["bottleneck"] = (analysis.get("bottleneck") or {}).get("primary")
    workloads = views.workloads(report)
    if workloads:
        # Workload runs (playbooks/workloads.yml): rows per status, and the hosts a workflow may branch on.
        data["workload_counts"] = dict(workloads["counts"])
        data["workload_failed_hosts"] = sorted(set(r["host"] for r in workloads["results"] if r["failure"]))
        data["workload_straggler_hosts"] = sorted(set(r["host"] for r in workloads["results"] if r["straggler"]))
    return {STATS_KEY: data}
