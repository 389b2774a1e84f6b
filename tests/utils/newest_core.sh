#!/usr/bin/env bash
# Playbook tests again on the newest supported ansible-core, in .venv-newest-core: by default those of what a core
# release can change under the collection (the callback, SSH and task timeouts, async ranks in an included loop with
# end_play, roles in check mode, action plugins, AWX slices and their merge). `newest_core.sh tests/integration`
# runs them all (about 15 minutes on 2 cores: too long for CI on top of the main suite).
# That core's controller needs Python >= 3.12: the newest such interpreter found is used; where none is
# installed the run is skipped with the reason (the main suite still covers the oldest supported core).
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
venv=$repo/.venv-newest-core
requirements=$repo/tests/requirements-newest-core.txt

find_python() {
    local candidate
    for candidate in python3.14 python3.13 python3.12 /root/.pyenv/versions/3.1[2-9]*/bin/python3 /usr/bin/python3; do
        command -v "$candidate" >/dev/null 2>&1 || [ -x "$candidate" ] || continue
        if "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
            echo "$candidate"; return 0
        fi
    done
    return 1
}

if ! python=$(find_python); then
    echo "newest_core.sh: SKIPPED: no Python >= 3.12 on this machine (ansible-core 2.21 needs one); only the oldest supported core was tested"
    exit 0
fi
if [ ! -f "$venv/.installed" ] || [ "$requirements" -nt "$venv/.installed" ]; then
    rm -rf "$venv"
    "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install --quiet --upgrade pip
    "$venv/bin/python" -m pip install --quiet -r "$requirements"
    touch "$venv/.installed"
fi
echo "newest_core.sh: $("$venv/bin/ansible" --version | head -n1) on $("$venv/bin/python" --version)"
cd "$repo"
if [ "$#" -eq 0 ]; then
    set -- tests/integration/test_report_callback.py tests/integration/test_hosts_die.py \
        tests/integration/test_profile_playbook.py tests/integration/test_workloads_playbook.py \
        tests/integration/test_role_remediate.py tests/integration/test_fabric_gate.py \
        tests/integration/test_awx_slices.py
fi
ANSIBLE_CONFIG=$repo/ansible.cfg ANSIBLE_COLLECTIONS_PATH=$repo/collections "$venv/bin/python" -m pytest -n 2 -q -p no:cacheprovider "$@"
