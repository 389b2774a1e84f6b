# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
name: fleet_report
type: aggregate
short_description: Gathers every host's doctor and profile results into one analysed fleet report
version_added: 0.1.0
description:
  - Collects the result of each P(continuum.hydra.doctor#module), P(continuum.hydra.profile#module),
    P(continuum.hydra.env_setup#module) and P(continuum.hydra.workload#module) task, and every host that was
    unreachable or whose task failed (they are in the report, never dropped).
  - Workload runs (C(playbooks/workloads.yml)) add a C(workloads) section to every format - per workload, a table
    per hardware class with median, min, max and stragglers, and the failures - and C(perf.csv) in O(report_dir),
    madengine's columns, one row per host and workload row. See C(docs/workloads.md).
  - At the end of the playbook analyses the fleet (hardware classes, configuration drift, stragglers, fleet
    bottleneck, history, optional batch plan) and writes the report atomically into O(report_dir) in each of
    O(formats) - C(fleet-report.json) (plus a timestamped copy), C(.md), C(.html), C(.junit.xml) and C(.prom) - then
    prints a summary, the failing checks with their hosts and GPUs, drift, stragglers and the top actions.
  - In screening runs (C(playbooks/screen.yml)) each node's P(continuum.hydra.screen#module) result is a doctor
    result (a node whose job never ran is C(unchecked), saying why); when each node was last screened is kept in
    C(screening.json) beside the history, and the report's C(screening) section says whether every candidate node was
    screened within the plan's C(max_age_days), naming the overdue ones by how long. See C(docs/screening.md).
  - The vendor reports the slurm_gate role takes before a drain (P(continuum.hydra.bug_report#module),
    C(slurm_gate_collect_evidence)) are named in the report's C(bug_reports), each with its file under
    C(evidence/<host>/) or why none was taken.
  - Writes nothing for a playbook that ran no continuum.hydra task. A report that cannot be written, a bad setting or
    an unreadable file is a warning and a line in the report, not a failed run.
  - Under AWX job slicing (the extra vars C(awx_workflow_job_id) and C(awx_job_id), which AWX sets) it writes only
    this slice's part, C(parts/<awx_workflow_job_id>/job-<awx_job_id>.json) under O(report_dir), and no
    C(fleet-report.*); C(playbooks/merge.yml) (the P(continuum.hydra.fleet_merge#module) task) merges the parts and
    this callback then writes the one report. See C(docs/awx.md).
  - Under AWX (the extra var C(awx_job_id), or the environment C(AWX_PRIVATE_DATA_DIR), C(AWX_ISOLATED_DATA_DIR), or
    C(JOB_ID) with C(AWX_HOST)), a O(report_dir) inside the job's private data dir (C(/runner) in the execution
    environment; AWX deletes it after the job) is one warning - keep reports on a shared path, see C(docs/awx.md).
  - See C(docs/fleet_report.md) and C(docs/fleet_analysis.md) in the collection.
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
  formats:
    description:
      - The files to write. V(json) is C(fleet-report.json) and its timestamped copy (what the SLURM gate and scripts
        read), V(markdown) C(fleet-report.md), V(html) C(fleet-report.html) (one self-contained page), V(junit)
        C(fleet-report.junit.xml) (one testcase per host and check), V(prometheus) C(fleet-report.prom) (for
        node_exporter's textfile collector).
      - In E(HYDRA_REPORT_FORMATS) and C(ansible.cfg), a comma-separated list.
    type: list
    elements: str
    default: [json, markdown, html, junit, prometheus]
    env:
      - name: HYDRA_REPORT_FORMATS
    ini:
      - section: callback_fleet_report
        key: formats
  history_dir:
    description:
      - Directory of the history snapshots (one compact file per run) that trends and repeat offenders are computed
        from. Defaults to C(history) under O(report_dir).
      - The findings store C(findings.json) lives here too (findings stay open until acknowledged with
        C(playbooks/acknowledge.yml); see C(docs/fleet_report.md)). It is kept whatever O(history_keep) says.
    type: path
    env:
      - name: HYDRA_HISTORY_DIR
    ini:
      - section: callback_fleet_report
        key: history_dir
  history_keep:
    description:
      - How many runs the history keeps, this one included; older snapshots are deleted. V(0) turns history off
        (nothing read or written).
    type: int
    default: 10
    env:
      - name: HYDRA_HISTORY_KEEP
    ini:
      - section: callback_fleet_report
        key: history_keep
  state_lock_timeout:
    description:
      - Seconds this run waits for another run (or C(playbooks/acknowledge.yml)) to finish with the findings store or
        the history, which share O(history_dir). Past it, that file is not updated and the report says so in one line
        (C(findings_store) in the JSON report, a problem line in the others); never a hang.
    type: float
    default: 60
    env:
      - name: HYDRA_STATE_LOCK_TIMEOUT
    ini:
      - section: callback_fleet_report
        key: state_lock_timeout
  straggler_history_runs:
    description:
      - How many runs (this one included) the history straggler rule combines - a host below its class in every one
        of them, by enough in all, is a straggler even when no single run says so (C(docs/fleet_analysis.md)). V(0)
        or V(1) judges this run alone. Needs O(history_keep) at least as large.
    type: int
    default: 3
    env:
      - name: HYDRA_STRAGGLER_HISTORY_RUNS
    ini:
      - section: callback_fleet_report
        key: straggler_history_runs
  straggler_rule:
    description:
      - Values of the straggler rule over its defaults, each V(KEY=NUMBER) - the thresholds C(docs/fleet_analysis.md)
        names, for example V(history_run_z=-1.8) with O(straggler_history_runs=5) on a fleet whose benchmark noise
        is heavy-tailed. A bad item is one problem line and the default rule is used.
      - In E(HYDRA_STRAGGLER_RULE) and C(ansible.cfg), a comma-separated list.
    type: list
    elements: str
    default: []
    env:
      - name: HYDRA_STRAGGLER_RULE
    ini:
      - section: callback_fleet_report
        key: straggler_rule
  class_groups:
    description:
      - Inventory groups that define the hardware classes, in order of precedence - a host's class is the first of
        these groups it belongs to. Hosts in none of them, and every host when this is empty, get an automatic class
        from their hardware (GPU model and count, CPU model, memory size).
      - In E(HYDRA_CLASS_GROUPS) and C(ansible.cfg), a comma-separated list.
    type: list
    elements: str
    default: []
    env:
      - name: HYDRA_CLASS_GROUPS
    ini:
      - section: callback_fleet_report
        key: class_groups
  expected_versions:
    description:
      - YAML or JSON file of golden values that configuration drift is judged against instead of the class majority -
        field names (C(driver_version), C(cuda_driver_version), C(rocm_version), C(vbios_version), C(kernel), C(torch_version),
        C(nccl_version), C(nccl_env), C(persistence_mode), C(ecc_mode), C(mig_mode), C(pcie_gen), C(pcie_width),
        C(gpu_count)) to a value or a list of accepted values, and optionally C(classes) mapping a class name to such
        fields. See C(docs/fleet_analysis.md).
    type: path
    env:
      - name: HYDRA_EXPECTED_VERSIONS
    ini:
      - section: callback_fleet_report
        key: expected_versions
  batch_global_size:
    description:
      - Global batch size (samples per step) to split across the profiled GPUs in proportion to their measured
        throughput. When set, the report has a batch plan and C(batch-plan.json) and C(batch-plan.yaml) are written
        to O(report_dir).
    type: int
    env:
      - name: HYDRA_BATCH_GLOBAL_SIZE
    ini:
      - section: callback_fleet_report
        key: batch_global_size
  batch_memory_per_sample_mib:
    description:
      - GPU memory one sample needs, in MiB. Bounds each GPU's batch by 90 % of its memory. Unbounded when unset.
    type: float
    env:
      - name: HYDRA_BATCH_MEMORY_PER_SAMPLE_MIB
    ini:
      - section: callback_fleet_report
        key: batch_memory_per_sample_mib
  batch_metric:
    description:
      - The per-GPU profile figure that measures throughput for the batch plan (a host-level figure of that name is
        divided among the host's GPUs).
      - Or the name of a workload that ran in the same playbook (P(continuum.hydra.workload#module), for example
        V(train_step)) - each host's measured performance of that workload, divided among its GPUs, is the
        throughput instead (a time metric is inverted).
    type: str
    default: bf16_tflops
    env:
      - name: HYDRA_BATCH_METRIC
    ini:
      - section: callback_fleet_report
        key: batch_metric
  placement_threshold:
    description:
      - GPUs whose placement score (0 to 100, NUMA and PCIe distance to the nearest NIC and to the job's CPUs, from
        C(gpu.topology) or the static profile; C(docs/topology.md)) is below this are listed in the report's
        C(placement) section with their nearest NIC.
    type: float
    default: 60
    env:
      - name: HYDRA_PLACEMENT_THRESHOLD
    ini:
      - section: callback_fleet_report
        key: placement_threshold
"""

import contextlib
import datetime
import os
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Optional

from ansible import constants as C
from ansible.errors import AnsibleError
from ansible.playbook.block import Block
from ansible.plugins.callback import CallbackBase

from ansible_collections.continuum.hydra.plugins.module_utils._status import UNREACHABLE
from ansible_collections.continuum.hydra.plugins.plugin_utils._callback_settings import (
    awx_storage_warning,
    options_or_defaults,
    read_settings,
)
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet import coverage, findings, history, parts, state_files
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.analysis import AnalysisOptions, analyse, cyclic_gc_paused
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.evidence import build_evidence, evidence_links
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.fabric import fabric_evidence
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.profile_summary import profile_summary
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.report import FleetCollector, no_hosts_message, timed_out_message
from ansible_collections.continuum.hydra.plugins.plugin_utils._fleet.workloads import host_entry as workload_entry
from ansible_collections.continuum.hydra.plugins.plugin_utils._render import batch_plan as plan_files
from ansible_collections.continuum.hydra.plugins.plugin_utils._render import formats, terminal
from ansible_collections.continuum.hydra.plugins.plugin_utils._render._text import one_line

DOCTOR = "continuum.hydra.doctor"
PROFILE = "continuum.hydra.profile"
ENV_SETUP = "continuum.hydra.env_setup"
WORKLOAD = "continuum.hydra.workload"
FABRIC = "continuum.hydra.fabric"  # one rank of playbooks/fabric.yml (its verdict comes from FABRIC_PLAN)
FABRIC_PLAN = "continuum.hydra.fabric_plan"  # the fabric test's planner: its last result holds the verdict
SCREEN = "continuum.hydra.screen"  # playbooks/screen.yml: a node's doctor result from its screening job, or why none
SCREEN_PLAN = "continuum.hydra.screen_plan"  # playbooks/screen.yml's rotation: the candidate nodes, for the coverage
HYDRA_ACTIONS = frozenset([DOCTOR, PROFILE, ENV_SETUP, WORKLOAD, FABRIC, FABRIC_PLAN, SCREEN, SCREEN_PLAN])
# The slurm_gate role's evidence before a drain: each node's vendor report, named in the report (not a host's verdict).
BUG_REPORT = "continuum.hydra.bug_report"
MERGE = "continuum.hydra.fleet_merge"  # playbooks/merge.yml: its result is the merged hosts of a sliced run
WRITING_ACTIONS = HYDRA_ACTIONS | {MERGE}  # a play with one of these makes this callback write reports
BATCH_PLAN_NAME = "batch-plan"
NAME = "continuum.hydra.fleet_report"


def _runs_hydra(tasks: Iterable[Any], actions: frozenset[str] = HYDRA_ACTIONS) -> bool:
    """Whether a play's own task list (blocks included) has a continuum.hydra task (one of actions)."""
    for item in tasks:
        if isinstance(item, Block):
            if _runs_hydra(item.block + item.rescue + item.always, actions):
                return True
        elif _action_of(item) in actions:
            return True
    return False


def _data(result: Any) -> Mapping[str, Any]:
    """A task result's return data, as this callback's own copy.

    ansible-core 2.19+ hands each callback a copy already cleaned of internal keys; its public ``result`` then
    converts every value to a native type once more, about 35 ms for one doctor result and, at fleet size, most
    of this callback's cost in the controller's single main process. The copy itself (``_return_data``) holds
    the same values; older cores and other result types go through ``_result``."""
    data = getattr(result, "_return_data", None)
    return data if isinstance(data, dict) else result._result


def _action_of(task: Any) -> str:
    return getattr(task, "resolved_action", None) or task.action


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = NAME
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._collector = FleetCollector()
        self._ran_hydra_task = False
        self._play_runs_hydra = False
        self._play_pattern: Any = None  # the running play's hosts pattern
        self._playbook: Optional[str] = None
        self._problems: list[str] = []
        self._settings: Optional[dict[str, Any]] = None
        self._slice: Optional[dict[str, str]] = None  # {workflow_job_id, job_id} when this run is an AWX slice
        self._slice_hosts: set[str] = set()
        self._merge: Optional[dict[str, Any]] = None  # merge.yml's summary of the parts it merged
        self._screens: dict[str, dict[str, Any]] = {}  # host -> its screen (continuum.hydra.screen's result)
        self._screen_plan: Optional[dict[str, Any]] = None  # the rotation's candidates and settings (screen_plan)
        self._bug_reports: list[dict[str, Any]] = []  # the vendor reports the gate took before a drain (bug_report)
        self._storage_checked = False

    def set_options(self, task_keys: Any = None, var_options: Any = None, direct: Any = None) -> None:
        try:
            super().set_options(task_keys=task_keys, var_options=var_options, direct=direct)
        except AnsibleError:
            self._plugin_options = options_or_defaults(self._load_name, task_keys, var_options, direct, self._problems)

    def _settings_now(self) -> dict[str, Any]:
        if self._settings is None:
            self._settings = read_settings(self.get_option, self._problems)
        return self._settings

    def v2_playbook_on_start(self, playbook: Any) -> None:
        self._playbook = os.path.basename(playbook._file_name)
        self._settings_now()
        for problem in self._problems:
            self._warn(problem)

    def v2_playbook_on_play_start(self, play: Any) -> None:
        self._play_runs_hydra = _runs_hydra(play.pre_tasks + play.tasks + play.post_tasks)
        self._play_pattern = play.hosts
        manager = play.get_variable_manager()
        if self._slice is None:
            self._slice = self._read_slice(manager.extra_vars if manager is not None else {})
        if not self._storage_checked and _runs_hydra(play.pre_tasks + play.tasks + play.post_tasks, WRITING_ACTIONS):
            self._storage_checked = True
            self._warn_awx_storage(manager.extra_vars if manager is not None else {})
        if self._play_runs_hydra and self._slice and manager is not None:
            # The hosts this slice was given (the inventory AWX cut, and --limit): those with no result are missing.
            try:
                self._slice_hosts.update(h.get_name() for h in manager._inventory.get_hosts(play.hosts))
            except (AnsibleError, AttributeError) as exc:
                self._problems.append("parts: cannot list the slice's hosts: %s" % one_line(exc))

    def _warn_awx_storage(self, extra_vars: Mapping[str, Any]) -> None:
        """One warning when this AWX job would write its reports into its private data dir (deleted with the job)."""
        problem = awx_storage_warning(self._settings_now()["report_dir"], extra_vars, os.environ, os.getcwd())
        if problem:
            self._problems.append("storage: %s" % problem)
            self._warn(problem)

    def _read_slice(self, extra_vars: Mapping[str, Any]) -> dict[str, str]:
        """{workflow_job_id, job_id} from AWX's extra vars when this run is a slice of a workflow; {} otherwise."""
        if extra_vars.get("awx_workflow_job_id") in (None, ""):
            return {}
        try:
            return {"workflow_job_id": parts.clean_id(extra_vars.get("awx_workflow_job_id"), "awx_workflow_job_id"),
                    "job_id": parts.clean_id(extra_vars.get("awx_job_id"), "awx_job_id")}
        except parts.PartError as exc:
            problem = "parts: %s; writing the whole report instead of a part" % exc
            self._problems.append(problem)
            self._warn(problem)
            return {}

    def v2_playbook_on_no_hosts_matched(self) -> None:
        if self._play_runs_hydra:
            # A report of no host, with one line saying so: silence would read as a run with nothing wrong.
            self._ran_hydra_task = True
            self._problems.append(no_hosts_message(self._play_pattern))

    def v2_playbook_on_task_start(self, task: Any, is_conditional: bool) -> None:
        if _action_of(task) in HYDRA_ACTIONS:
            self._ran_hydra_task = True

    def _remember_groups(self, result: Any) -> None:
        if self._settings_now()["class_groups"]:
            host = result._host
            self._collector.set_groups(host.get_name(), [g.name for g in host.get_groups()])

    def _take_bug_reports(self, host: str, data: Mapping[str, Any]) -> None:
        """Each node's vendor report (a loop's items, or one result): its file, or why there is none."""
        for item in data.get("results") or [data]:
            if not isinstance(item, Mapping) or item.get("skipped"):
                continue
            loop_item = item.get("item") if isinstance(item.get("item"), Mapping) else {}
            self._bug_reports.append({
                "host": str(item.get("host") or loop_item.get("host") or host), "path": item.get("path"),
                "bytes": item.get("bytes"), "tool": item.get("tool"),
                "problem": None if item.get("path") else " ".join(str(item.get("msg") or "no report taken").split())})

    def v2_runner_on_ok(self, result: Any) -> None:
        action = _action_of(result._task)
        if action == BUG_REPORT:
            self._take_bug_reports(result._host.get_name(), _data(result))
            return
        if action == MERGE:
            self._take_merge(_data(result))
            return
        if action not in HYDRA_ACTIONS:
            return
        host = result._host.get_name()
        self._remember_groups(result)
        data = _data(result)
        if action == DOCTOR:
            self._collector.add_doctor(host, data)
        elif action == PROFILE:
            summary = profile_summary(data)
            if summary is not None:
                self._collector.add_profile(host, summary)
        elif action == WORKLOAD:
            work = workload_entry(data)
            if work is not None:
                self._collector.add_workload(host, work)
        elif action == FABRIC_PLAN:
            if isinstance(data.get("fabric"), dict):  # the last round's: every host's fabric.* checks, the rounds
                self._collector.add_fabric(data["fabric"], data.get("checks") or {})
        elif action == FABRIC:
            pass  # a rank's launch or result: the planner judges the rounds
        elif action == SCREEN:
            # The screening job's doctor result enters as any doctor result; a node not screened is unchecked.
            self._collector.add_registered(host, data)
            if isinstance(data.get("screen"), dict):
                self._screens[host] = dict(data["screen"], status=self._collector.hosts[host]["status"])
        elif action == SCREEN_PLAN:
            if isinstance(data.get("screen_plan"), dict):
                self._screen_plan = data["screen_plan"]
        elif isinstance(data.get("manifest"), dict):
            self._collector.add_env_setup(host, data["manifest"])

    def _concerns_fleet(self, result: Any) -> bool:
        # A failure in a play that checks no host (a SLURM controller play, say) is not a host's verdict.
        return self._play_runs_hydra or _action_of(result._task) in HYDRA_ACTIONS

    def v2_runner_on_failed(self, result: Any, ignore_errors: bool = False) -> None:
        if _action_of(result._task) == BUG_REPORT:
            self._take_bug_reports(result._host.get_name(), _data(result))
            return
        if not self._concerns_fleet(result):
            return
        host = result._host.get_name()
        self._remember_groups(result)
        # doctor with fail_on still returns its full result: keep the verdict, not just "failed".
        data = _data(result)
        if _action_of(result._task) == DOCTOR and "checks" in data:
            self._collector.add_doctor(host, data)
        elif isinstance(data.get("timedout"), Mapping):  # the task keyword timeout (docs/hosts_die.md)
            self._collector.add_task_failed(host, timed_out_message(result._task.get_name(), data["timedout"].get("period")))
        else:
            msg = result._result.get("msg") or result._result.get("stderr") or "task failed"
            self._collector.add_task_failed(host, "%s: %s" % (result._task.get_name(), str(msg).strip().splitlines()[0] if str(msg).strip() else msg))

    def v2_runner_on_unreachable(self, result: Any) -> None:
        if not self._concerns_fleet(result):
            return
        self._remember_groups(result)
        self._collector.add_unreachable(result._host.get_name(), str(result._result.get("msg") or UNREACHABLE).strip())

    def _take_merge(self, result: Mapping[str, Any]) -> None:
        """merge.yml's merged hosts (the file the action left, read and removed) become this run's: rendered below like
        any run's, once."""
        path = result.get("merged_file")
        if not isinstance(path, str):
            return
        self._ran_hydra_task = True
        self._merge = dict(result.get("merge") or {})
        problems = list(result.get("problems") or [])
        try:
            with cyclic_gc_paused():  # millions of new objects: full collections walking them all cost more per host
                merged = parts.parse_merged(state_files.read_lines(path))
        except (OSError, UnicodeDecodeError, parts.PartError) as exc:
            merged = {"hosts": {}, "groups": {}}
            problems.append("merge: the merged hosts were not read from %s: %s; the report has none of them (the file "
                            "is left for a look)" % (path, one_line(exc)))
        else:
            with contextlib.suppress(OSError):
                os.unlink(path)
        for name, entry in merged["hosts"].items():
            self._collector.add_entry(name, entry)
        for name, names in merged["groups"].items():
            self._collector.set_groups(name, names)
        for problem in problems:
            self._problems.append(problem)
            self._warn(problem)

    def _write_part(self, now: datetime.datetime, settings: Mapping[str, Any]) -> None:
        """A slice's part (every host entry and the slice's hosts), in place of the shared fleet-report.*."""
        ids = self._slice
        if ids is None:  # only a slice writes a part
            return
        part = parts.build_part(self._collector.hosts, self._slice_hosts, self._collector.groups,
                                ids["workflow_job_id"], ids["job_id"], now.isoformat(timespec="seconds"), self._playbook)
        path = parts.part_path(settings["report_dir"], ids["workflow_job_id"], ids["job_id"])
        if not formats.write_file(path, state_files.json_text(part), self._warn):
            return
        self._display.display("continuum.hydra fleet report: slice part of %d host%s (workflow %s, job %s): %s; "
                              "playbooks/merge.yml writes the report" % (
                                  len(part["hosts"]), "" if len(part["hosts"]) == 1 else "s",
                                  ids["workflow_job_id"], ids["job_id"], path))

    def v2_playbook_on_stats(self, stats: Any) -> None:
        if not self._ran_hydra_task:
            return
        settings = self._settings_now()
        now = datetime.datetime.now(datetime.timezone.utc)
        if self._slice and self._merge is None:
            with cyclic_gc_paused():
                self._write_part(now, settings)
            return
        with cyclic_gc_paused():
            report = self._collector.build(now.isoformat(timespec="seconds"), self._playbook)
            if self._merge is not None:
                report["merge"] = self._merge
            with self._history_locked(settings) as history_usable:
                options = self._analyse(report, settings, history_usable)
                if options is not None:
                    self._write_history(now, settings, options)
            self._update_findings(report, now, settings)
            self._update_screening(report, now, settings)
            self._write_evidence(report, settings)
            if self._bug_reports:
                report["bug_reports"] = list(self._bug_reports)
            paths = formats.write_report(report, settings["report_dir"], settings["formats"], now, self._warn)
            if options is not None:
                paths.extend(self._write_batch_plan(report, settings))
            lines = terminal.render(report, paths) + self._bug_report_lines()
        for text, colour in lines:
            self._display.display(text, color=colour)

    @contextlib.contextmanager
    def _history_locked(self, settings: Mapping[str, Any]) -> Iterator[bool]:
        """The history's lock around its read and write (whether history is usable in the block): another run's
        snapshot pruning must not pull a file from under this run's read, nor this run's write race its pruning."""
        if settings["history_keep"] <= 0:
            yield False
            return
        with contextlib.ExitStack() as stack:
            try:
                stack.enter_context(state_files.locked(history.lock_target(settings["history_dir"]), settings["state_lock_timeout"]))
            except OSError as exc:
                problem = "history: not read or written this run: %s" % one_line(exc)
                self._problems.append(problem)
                self._warn(problem)
                yield False
                return
            yield True

    def _analyse(self, report: dict[str, Any], settings: Mapping[str, Any], history_usable: bool = True) -> Optional[AnalysisOptions]:
        keep = settings["history_keep"] if history_usable else 0
        options = AnalysisOptions(class_groups=settings["class_groups"], host_groups=self._collector.groups,
                                  expected=settings["expected"], batch=settings["batch"], problems=self._problems,
                                  straggler_rule=settings["straggler_rule"], straggler_history_runs=settings["straggler_history_runs"],
                                  placement_threshold=settings["placement_threshold"])
        if keep > 0:
            options.history = history.read_snapshots(settings["history_dir"], keep - 1, options.problems)
        try:
            analyse(report, options)
        except Exception as exc:  # pylint: disable=broad-exception-caught
            # A bug in the analysis must not cost the report of what doctor found.
            report.pop("analysis", None)
            self._warn("fleet analysis failed, the report has none: %s: %s" % (type(exc).__name__, one_line(exc)))
            return None
        return options

    def _write_history(self, now: datetime.datetime, settings: Mapping[str, Any], options: AnalysisOptions) -> None:
        if options.current_snapshot is None:
            return
        try:
            history.write_snapshot(settings["history_dir"], options.current_snapshot, now, settings["history_keep"])
        except OSError as exc:
            self._warn("cannot write the history snapshot to %s: %s" % (settings["history_dir"], exc))
        options.current_snapshot = None  # written: not held while the formats are rendered

    def _update_screening(self, report: dict[str, Any], now: datetime.datetime, settings: Mapping[str, Any]) -> None:
        """A screening run (playbooks/screen.yml): record each node's screen beside the history, and give the report its
        ``screening`` coverage (docs/screening.md)."""
        if self._screen_plan is None and not self._screens:
            return
        plan = self._screen_plan or {}
        candidates = list(plan.get("candidates") or []) + list(self._screens)
        max_age = plan.get("max_age_days") or coverage.DEFAULT_MAX_AGE_DAYS
        store, problems = coverage.update_store(coverage.store_path(settings["history_dir"]), self._screens, now,
                                                settings["state_lock_timeout"])
        report["screening"] = dict(coverage.coverage(store, candidates, self._screens, max_age, now),
                                   max_nodes=plan.get("max_nodes"), problems=problems)
        line = coverage.overdue_line(report["screening"])
        if isinstance(report.get("analysis"), dict):  # shown in the terminal, Markdown and HTML reports
            report["analysis"]["problems"].extend(problems + ([line] if line else []))

    def _update_findings(self, report: dict[str, Any], now: datetime.datetime, settings: Mapping[str, Any]) -> None:
        """Fold this run into the findings store beside the history, and give the report its ``findings``."""
        path = findings.store_path(settings["history_dir"])
        try:
            state, store = findings.update_store(path, report, now, settings["state_lock_timeout"])
            report["findings"] = findings.listing(state, shared=True)  # the state is dropped below: no copies
            report["findings_timeline"] = findings.timeline(state)
        except Exception as exc:  # pylint: disable=broad-exception-caught
            # A bug in the findings must not cost the report of what doctor found.
            report.setdefault("findings", [])
            store = {"path": path, "updated": False, "set_aside": None,
                     "problems": ["findings: not updated: %s: %s" % (type(exc).__name__, one_line(exc))]}
        report["findings_store"] = store  # the report itself says when the store was set aside or not updated
        for problem in store["problems"]:
            self._problems.append(problem)
            self._warn(problem)

    def _write_evidence(self, report: dict[str, Any], settings: Mapping[str, Any]) -> None:
        """evidence/<host>/<uuid>.json per failing GPU (an RMA ticket's attachment), listed in the report's ``evidence``.

        Files of GPUs that no longer fail are left in place: a ticket may still point at them."""
        try:
            records = build_evidence(report) + fabric_evidence(report)
        except Exception as exc:  # pylint: disable=broad-exception-caught
            # A bug here must not cost the report of what doctor found.
            self._warn("no evidence files: %s: %s" % (type(exc).__name__, one_line(exc)))
            records = []
        written = [record for record in records if formats.write_file(
            os.path.join(settings["report_dir"], *record["path"].split("/")), state_files.json_text(record), self._warn)]
        report["evidence"] = evidence_links(written)

    def _bug_report_lines(self) -> list[tuple[str, Optional[str]]]:
        """One line per vendor report taken before a drain (or why none was), after the report's own lines."""
        lines: list[tuple[str, Optional[str]]] = []
        for taken in self._bug_reports:
            if taken["path"]:
                text = "Vendor report of %s, taken before its drain: %s (%s bytes)" % (taken["host"], taken["path"], taken["bytes"])
                lines.append((text, None))
            else:
                lines.append(("No vendor report of %s before its drain: %s" % (taken["host"], taken["problem"]), C.COLOR_WARN))
        return lines

    def _write_batch_plan(self, report: Mapping[str, Any], settings: Mapping[str, Any]) -> list[str]:
        plan = report["analysis"].get("batch_plan")
        if not plan or plan["error"]:
            return []
        base = os.path.join(settings["report_dir"], BATCH_PLAN_NAME)
        if formats.write_file(base + ".json", plan_files.json_pieces(plan), self._warn) and formats.write_file(
                base + ".yaml", plan_files.yaml_text(plan), self._warn):
            return [base + ".json"]
        return []

    def _warn(self, line: str) -> None:
        self._display.warning("%s: %s" % (NAME, line))
