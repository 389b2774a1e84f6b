#!/usr/bin/python
# Copyright (c) continuum.hydra contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)

DOCUMENTATION = r"""
module: fabric
short_description: One rank of an all-reduce across hosts, to measure and judge the network between them
version_added: 0.3.0
description:
  - Runs this host's rank of a collective that every host of a group runs together, usually launched by
    C(playbooks/fabric.yml), which plans the groups with P(continuum.hydra.fabric_plan#module) (one group per round
    at first, then halves, pairs and cross-cut probes until the slow host or link is named; C(docs/fabric.md)).
  - "Rendezvous: rank 0 listens on its O(address) (any free port, or the first free one of O(port_range)) and writes
    C(port=N) into O(port_file); the playbook reads it and starts the other ranks with O(master_port). A rank joins
    by answering an HMAC-SHA256 challenge under O(token), and rank 0 proves the token back, so a process without
    the token can neither join nor pose as rank 0."
  - "The backend is picked by rank 0 from what every rank offers and named in the result: C(nccl) (C(rccl) on ROCm)
    through C(torch.distributed) where every host has torch and a GPU, C(gloo) through torch on CPU, and
    otherwise C(tcp): a ring all-reduce over plain TCP in the standard library (Python 3.9+, no dependency),
    reduce-scatter then all-gather, checking every element of the result exactly."
  - Each size of O(sizes) is all-reduced O(iterations) times after O(warmup) untimed runs; the result has each
    size's time, algorithm bandwidth and bus bandwidth (nccl-tests' busbw = algbw x 2(n-1)/n) for the group, the
    slowest rank's time counting.
  - "Nothing waits without a deadline: rank 0 waits for the others until O(timeouts.join); a ring step that
    receives nothing for O(timeouts.step) fails; the whole rank ends by O(timeouts.run). A rank that does not
    join, or whose connections end mid-run, is named in the group's verdict (C(missing) / C(lost)) and the others
    stop and report; the module returns in every case (a failed group is not a failed task)."
  - "O(mode=idle) runs no rank: it reads whether the host is idle - no GPU compute process (C(nvidia-smi
    --query-compute-apps); on AMD the processes under C(/sys/class/kfd/kfd/proc)) and, on a SLURM node, no job holding
    it (C(squeue -w)) - through the same idle guard as doctor's deep level. C(playbooks/fabric.yml) runs it on every host
    before the first round; P(continuum.hydra.fabric_plan#module) leaves a busy host (or one that cannot be read) out of
    every round, its checks C(SKIP) naming the job or process, unless O(force)."
  - The module changes nothing on the host but rank 0's port file (removed when it ends).
  - Runs on the target's Python 3.9+ with the standard library alone; torch only in a child interpreter
    (O(torch_python)) when present.
author:
  - continuum.hydra developers (@continuum-hydra)
extends_documentation_fragment:
  - continuum.hydra._attributes
  - continuum.hydra._attributes.INFO_MODULE
options:
  mode:
    description:
      - V(rank) runs this host's rank of the collective.
      - V(idle) only reads whether the host is idle (RV(idle)); no rank runs and the rank options are not needed.
    type: str
    choices: [rank, idle]
    default: rank
  slurm_node:
    description:
      - O(mode=idle) - the node's SLURM name, for the idle guard's C(squeue -w). Defaults to E(SLURMD_NODENAME), else
        the short host name. A node C(squeue) does not know cannot be confirmed idle, and is not tested.
    type: str
  force:
    description:
      - O(mode=idle) - report the host as loadable even when the idle guard finds it busy (or cannot read it); the C(forced) key of RV(idle)
        says what occupied it, and its C(fabric.collective) check names it. It loads a user's job; use it on nodes you own.
    type: bool
    default: false
  rank:
    description: This host's rank in its group, 0 to O(world) - 1; rank 0 is the rendezvous. Required with O(mode=rank).
    type: int
  world:
    description: The number of ranks (hosts) in the group, 2 or more. Required with O(mode=rank).
    type: int
  run_id:
    description:
      - The group's run id (letters, digits, C(.), C(_), C(-); at most 64), the same on every rank. Required with
        O(mode=rank).
    type: str
  token:
    description: The group's shared secret (at least 16 characters), random per run; never logged. Required with O(mode=rank).
    type: str
  address:
    description:
      - This host's address on the network to test, which the rank binds to (the inventory address, or
        C(fabric_address)). Required with O(mode=rank).
    type: str
  master_address:
    description: Rank 0's address. Required with O(mode=rank).
    type: str
  master_port:
    description: Rank 0's port (from its O(port_file)); required on every rank but 0.
    type: int
  port_file:
    description: Where rank 0 writes C(port=N) (or C(error=REASON) when it cannot listen); required on rank 0.
    type: path
  port_range:
    description:
      - C(FIRST-LAST), for example C(29500-29599) - the ports rank 0 and the ring listeners take (the first free one).
        By default any free port, which needs the hosts to accept TCP from each other on ephemeral ports.
    type: str
  backend:
    description: V(auto) picks the best backend every rank has; the others insist (a rank without it fails the group).
    type: str
    choices: [auto, tcp, gloo, nccl]
    default: auto
  sizes:
    description: Message sizes in bytes (multiples of 4); the last one's bus bandwidth is the group's figure.
    type: list
    elements: int
    default: [8, 65536, 1048576, 16777216, 67108864]
  iterations:
    description: Timed all-reduces per size.
    type: int
    default: 5
  latency_iterations:
    description: Timed all-reduces per small size (a step of at most 16 KiB), which measure latency.
    type: int
    default: 20
  warmup:
    description: Untimed all-reduces per size before the timed ones (the first one's result is checked).
    type: int
    default: 1
  seed:
    description: Seed of the data the standard-library ring reduces (the same on every rank).
    type: int
    default: 1
  timeouts:
    description: Deadlines in seconds, counted from this rank's start.
    type: dict
    default: {}
    suboptions:
      join:
        description: Until every rank has joined rank 0 and connected its ring. Default 120.
        type: float
      step:
        description: The longest a ring step may receive nothing before the neighbour counts as lost. Default 30.
        type: float
      run:
        description: The whole rank, join included; must exceed O(timeouts.join). Default 600.
        type: float
  torch_python:
    description: Python interpreter whose torch the C(gloo) and C(nccl) backends use. Defaults to the module's.
    type: path
  host:
    description: This host's inventory name, which the group's verdict names it by. Defaults to O(address).
    type: str
  round:
    description: The isolation round this run belongs to (echoed in the result).
    type: int
  group:
    description: The group id within the round (echoed in the result).
    type: str
seealso:
  - module: continuum.hydra.fabric_plan
notes:
  - C(docs/fabric.md) in the collection describes the rounds, the ports to open and how long a run takes.
"""

EXAMPLES = r"""
- name: Whether this host is idle (playbooks/fabric.yml runs this before the first round; a busy host is not tested)
  continuum.hydra.fabric:
    mode: idle
    slurm_node: gpu-a01
  register: hydra_fabric_idle

# playbooks/fabric.yml launches the ranks with async and poll 0 (a synchronous task would wait for fork slots that
# the other ranks hold) and collects them with async_status; by hand, for two hosts:
- name: Rank 0 (binds a free port on its address, writes it into the port file)
  continuum.hydra.fabric:
    rank: 0
    world: 2
    run_id: r1g1-5f3a9c
    token: "{{ fabric_token }}"
    address: 10.0.0.11
    master_address: 10.0.0.11
    port_file: /tmp/hydra-fabric-r1g1-5f3a9c.port
  async: 700
  poll: 0

- name: Rank 1
  continuum.hydra.fabric:
    rank: 1
    world: 2
    run_id: r1g1-5f3a9c
    token: "{{ fabric_token }}"
    address: 10.0.0.12
    master_address: 10.0.0.11
    master_port: 41234
    backend: tcp
    sizes: [8, 1048576]
  async: 700
  poll: 0
"""

RETURN = r"""
idle:
  description:
    - What the idle guard read - C(node) (the SLURM name asked), C(gpu_processes), C(slurm) (the jobs holding the node;
      null on a host that is not a SLURM node), C(unconfirmed) (what could not be read), C(occupants), C(force),
      C(refused) (why the host must not be tested, null when it may) and C(forced) (what O(force) overrode, or null).
  returned: O(mode=idle)
  type: dict
  sample: {"node": "gpu-a01", "gpu_processes": [{"pid": 41234, "gpu": "GPU-5d2e8c4a-6a1f-2b7c-9d3e-0f1a2b3c4d5e",
                                                 "used_memory_mib": 30512, "source": "nvidia-smi"}],
           "slurm": null, "unconfirmed": [], "force": false, "forced": null,
           "occupants": ["GPU process 41234 on GPU-5d2e8c4a-6a1f-2b7c-9d3e-0f1a2b3c4d5e"],
           "refused": "node busy (GPU process 41234 on GPU-5d2e8c4a-6a1f-2b7c-9d3e-0f1a2b3c4d5e); force: true loads it anyway"}
fabric:
  description: This rank's run.
  returned: O(mode=rank)
  type: dict
  contains:
    run_id:
      description: O(run_id).
      type: str
    rank:
      description: O(rank).
      type: int
    world:
      description: O(world).
      type: int
    host:
      description: O(host).
      type: str
    outcome:
      description:
        - V(ok) (the group finished; figures in RV(fabric.verdict)), V(not_joined) (this rank could not join rank 0),
          V(peer_lost) (another rank did not join or was lost; nothing said about this host), V(broken) (this rank
          itself failed - its address cannot be bound, the backend is missing, the run deadline passed).
      type: str
      sample: ok
    reason:
      description: What went wrong, in one line; null when V(ok).
      type: str
    backend:
      description: The backend the group used, V(tcp), V(gloo), V(nccl) or V(rccl).
      type: str
      sample: tcp
    reducer:
      description: How the C(tcp) ring added slices on this host (V(numpy), V(audioop) or V(int)).
      type: str
    rows:
      description: This rank's own timing per size (C(bytes), C(seconds), C(iterations), C(verified)).
      type: list
      elements: dict
    verdict:
      description:
        - Rank 0's verdict on the group, the same on every rank that received it - C(complete), C(backend),
          C(members) (hosts in rank order), C(rows) (per size C(bytes), C(time_us), C(algbw_gbps), C(busbw_gbps),
          C(verified); the slowest rank's time), C(missing) and C(lost) (C(rank), C(reason)), C(broken),
          C(reports) (which neighbour each failing rank lost), C(rejected_count) (connections that failed the
          challenge).
        - Null when rank 0 never sent one (it was lost, or this rank never joined).
      type: dict
      sample: {"complete": true, "backend": "tcp", "members": ["n1", "n2"], "missing": [], "lost": [],
               "rows": [{"bytes": 67108864, "time_us": 81234.5, "algbw_gbps": 0.826, "busbw_gbps": 0.826,
                         "verified": true}]}
    duration_s:
      description: Wall time of this rank.
      type: float
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.continuum.hydra.plugins.module_utils._fabric import rank as _rank

DEFAULT_TIMEOUTS = {"join": 120.0, "step": 30.0, "run": 600.0}


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            mode=dict(type="str", choices=["rank", "idle"], default="rank"),
            slurm_node=dict(type="str"),
            force=dict(type="bool", default=False),
            rank=dict(type="int"),
            world=dict(type="int"),
            run_id=dict(type="str"),
            token=dict(type="str", no_log=True),
            address=dict(type="str"),
            master_address=dict(type="str"),
            master_port=dict(type="int"),
            port_file=dict(type="path"),
            port_range=dict(type="str"),
            backend=dict(type="str", choices=list(_rank.BACKENDS), default="auto"),
            sizes=dict(type="list", elements="int", default=[8, 65536, 1048576, 16777216, 67108864]),
            iterations=dict(type="int", default=5),
            latency_iterations=dict(type="int", default=20),
            warmup=dict(type="int", default=1),
            seed=dict(type="int", default=1),
            timeouts=dict(type="dict", default={}, options=dict(join=dict(type="float"), step=dict(type="float"),
                                                                run=dict(type="float"))),
            torch_python=dict(type="path"),
            host=dict(type="str"),
            round=dict(type="int"),
            group=dict(type="str"),
        ),
        required_if=[("mode", "rank", ("rank", "world", "run_id", "token", "address", "master_address"))],
        supports_check_mode=True,
    )
    params = dict(module.params)
    if params.pop("mode") == "idle":
        module.exit_json(changed=False, idle=_rank.idle(params["slurm_node"], params["force"]))
    for name in ("slurm_node", "force"):
        params.pop(name)
    timeouts = dict(DEFAULT_TIMEOUTS)
    timeouts.update({name: value for name, value in (params.pop("timeouts") or {}).items() if value is not None})
    params.update(join_timeout=timeouts["join"], step_timeout=timeouts["step"], run_timeout=timeouts["run"],
                  host=params["host"] or params["address"], reducer=None)
    try:
        result = _rank.run(params)
    except _rank.FabricInputError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, fabric=result)


if __name__ == "__main__":
    main()
