"""Write roles/<role>/README.md from the role's meta/argument_specs.yml: the variables have one source, the spec.

Usage: `make docs` (python tests/utils/gen_role_readmes.py). tests/unit/test_docs.py fails when a README is stale.
"""

import os
import re
import sys

import yaml

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))

# Ansible's documentation markup (C(), O(), V(), P(), RV(), E()) as Markdown code.
_MARKUP = re.compile(r"\b(?:C|O|V|RV|E)\(([^()]*)\)|\bP\(([^()#]*)#[^()]*\)")

# What a first play with the role looks like; the variables are the spec's.
EXAMPLES = {
    "gpu_settings": """- name: Persistence mode on and a 300 W power limit on every GPU
  hosts: gpu_nodes
  roles:
    - role: continuum.hydra.gpu_settings
      vars:
        gpu_settings_persistence_mode: true
        gpu_settings_power_limit: 300""",
    "cgroup_limits": """- name: Keep the data loader of the ingest service to 8 GiB and two cores
  hosts: gpu_nodes
  roles:
    - role: continuum.hydra.cgroup_limits
      vars:
        cgroup_limits_limits:
          - name: ingest
            processes: [ingest-loader]
            memory_max: 8G
            cpu_percent: 200""",
    "mig": """- name: Split GPU 0 into seven 1g.10gb instances (only with mig_confirm)
  hosts: a100_nodes
  roles:
    - role: continuum.hydra.mig
      vars:
        mig_gpus: ["0"]
        mig_mode: enabled
        mig_layout:
          "0": [1g.10gb, 1g.10gb, 1g.10gb, 1g.10gb, 1g.10gb, 1g.10gb, 1g.10gb]
        mig_confirm: true""",
    "slurm_gate": """# playbooks/validate_partition.yml runs doctor on the nodes, then this role on the controller:
- name: Drain the failing nodes, resume the recovered ones
  hosts: slurm_controller
  roles:
    - role: continuum.hydra.slurm_gate
      vars:
        slurm_gate_nodes: "{{ groups['slurm_nodes'] }}"
        slurm_gate_max_fraction: 0.1""",
    "slurm_healthcheck": """- name: Run doctor's quick checks as the SLURM HealthCheckProgram on every compute node
  hosts: slurm_nodes
  become: true
  roles:
    - role: continuum.hydra.slurm_healthcheck
      vars:
        slurm_healthcheck_expect: "{{ hydra_expect | default({}) }}"
        slurm_healthcheck_interval: 300
        slurm_healthcheck_manage_conf: false  # prints the slurm.conf lines""",
    "tenant_guard": """- name: Guard tenants' p99 SLOs on the shared GPU nodes, limiting the noisy neighbour's I/O
  hosts: shared_gpu_nodes
  become: true
  roles:
    - role: continuum.hydra.tenant_guard
      vars:
        tenant_guard_mode: enforce  # recommend (the default) only writes what it would do
        tenant_guard_expect:
          tenant_slo_p99_ms: 100
          tenant_persistence_runs: 3
          tenant_io_limit_max_bps: 52428800""",
}


def plain(text):
    return _MARKUP.sub(lambda m: "`%s`" % (m.group(1) if m.group(1) is not None else m.group(2)), " ".join(str(text).split()))


def _lines(value):
    return value if isinstance(value, list) else [value]


def _rows(options, prefix=""):
    for name, spec in options.items():
        kind = spec.get("type", "str")
        if kind == "list" and spec.get("elements"):
            kind = "list of %s" % spec["elements"]
        facts = []
        if spec.get("required"):
            facts.append("required")
        if "default" in spec:
            facts.append("default `%s`" % yaml.safe_dump(spec["default"], default_flow_style=True).strip().rstrip(".").strip())
        if spec.get("choices"):
            facts.append("one of %s" % ", ".join("`%s`" % c for c in spec["choices"]))
        description = " ".join(plain(line) for line in _lines(spec.get("description", "")))
        yield "| `%s%s` | %s | %s | %s |" % (prefix, name, kind, "; ".join(facts) or "-", description.replace("|", "\\|"))
        if spec.get("options"):
            yield from _rows(spec["options"], prefix + name + ".")


def render(role):
    with open(os.path.join(REPO, "roles", role, "meta", "argument_specs.yml")) as handle:
        spec = yaml.safe_load(handle)["argument_specs"]["main"]
    lines = ["# continuum.hydra.%s" % role, "", plain(spec["short_description"]) + ".", ""]
    lines += ["- %s" % plain(line) for line in _lines(spec.get("description", []))]
    lines += ["", "Generated from `meta/argument_specs.yml` by `make docs`; Ansible checks the same spec when the role runs.", "",
              "## Variables", "", "| variable | type | required, default, choices | meaning |", "| --- | --- | --- | --- |"]
    lines += list(_rows(spec.get("options") or {}))
    lines += ["", "## Example", "", "```yaml", EXAMPLES[role], "```", ""]
    return "\n".join(lines)


def roles():
    return sorted(name for name in os.listdir(os.path.join(REPO, "roles"))
                  if os.path.exists(os.path.join(REPO, "roles", name, "meta", "argument_specs.yml")))


if __name__ == "__main__":
    for name in roles():
        with open(os.path.join(REPO, "roles", name, "README.md"), "w") as out:
            out.write(render(name))
    sys.exit(0)
