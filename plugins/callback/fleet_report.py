# -*- coding: utf-8 -*-
# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: fleet_report
type: aggregate
short_description: Gathers every host's doctor result into one fleet report
version_added: 0.1.0
description:
  - Collects the result of each P(continuum.hydra.doctor#module) task, and every host that was unreachable or whose
    task failed (they are in the report, never dropped).
  - At the end of the playbook writes C(fleet-report.json) and a timestamped copy atomically into O(report_dir), and
    prints a summary, the failing checks with their hosts and GPUs, and the top actions.
  - Writes nothing for a playbook that ran no continuum.hydra task. A report that cannot be written is a warning,
    not a failed run.
requirements:
  - Enable it with C(callbacks_enabled = continuum.hydra.fleet_report) in C(ansible.cfg) or
    E(ANSIBLE_CALLBACKS_ENABLED).
options:
  report_dir:
    description: Directory the reports are written to; created when missing.
    type: path
    default: ./reports
    env:
      - name: HYDRA_REPORT_DIR
    ini:
      - section: callback_fleet_report
        key: report_dir
"""

import datetime
import json
import os

from ansible.plugins.callback import CallbackBase

from ansible_collections.continuum.hydra.plugins.module_utils._atomic import write_atomic
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.report import FleetCollector
from ansible_collections.continuum.hydra.plugins.plugin_utils._render import terminal

HYDRA_ACTIONS = frozenset(["continuum.hydra.doctor"])
REPORT_NAME = "fleet-report"


def _action_of(task):
    return getattr(task, "resolved_action", None) or task.action


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "continuum.hydra.fleet_report"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super(CallbackModule, self).__init__(*args, **kwargs)
        self._collector = FleetCollector()
        self._ran_hydra_task = False
        self._playbook = None

    def v2_playbook_on_start(self, playbook):
        self._playbook = os.path.basename(playbook._file_name)

    def v2_playbook_on_task_start(self, task, is_conditional):
        if _action_of(task) in HYDRA_ACTIONS:
            self._ran_hydra_task = True

    def v2_runner_on_ok(self, result):
        if _action_of(result._task) in HYDRA_ACTIONS:
            self._collector.add_doctor(result._host.get_name(), result._result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        host = result._host.get_name()
        # doctor with fail_on still returns its full result: keep the verdict, not just "failed".
        if _action_of(result._task) in HYDRA_ACTIONS and "checks" in result._result:
            self._collector.add_doctor(host, result._result)
        else:
            msg = result._result.get("msg") or result._result.get("stderr") or "task failed"
            self._collector.add_task_failed(host, "%s: %s" % (result._task.get_name(), str(msg).strip().splitlines()[0] if str(msg).strip() else msg))

    def v2_runner_on_unreachable(self, result):
        self._collector.add_unreachable(result._host.get_name(), str(result._result.get("msg") or "unreachable").strip())

    def v2_playbook_on_stats(self, stats):
        if not self._ran_hydra_task:
            return
        now = datetime.datetime.now(datetime.timezone.utc)
        report = self._collector.build(now.isoformat(timespec="seconds"), self._playbook)
        paths = self._write(report, now)
        for text, colour in terminal.render(report, paths[:1]):
            self._display.display(text, color=colour)

    def _write(self, report, now):
        directory = self.get_option("report_dir")
        text = json.dumps(report, indent=1, sort_keys=True, default=str) + "\n"
        stable = os.path.join(directory, REPORT_NAME + ".json")
        stamped = os.path.join(directory, "%s-%s.json" % (REPORT_NAME, now.strftime("%Y%m%dT%H%M%SZ")))
        try:
            write_atomic(stamped, text)
            write_atomic(stable, text)
        except (OSError, IOError) as exc:
            self._display.warning("continuum.hydra.fleet_report: cannot write the report to %s: %s" % (directory, exc))
            return []
        return [stable, stamped]
