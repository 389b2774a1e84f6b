#!/usr/bin/env bash
# Run every role's Molecule scenario (roles/<role>/molecule/default): `molecule test` per role, one after the
# other, each in a temp directory of its own, so parallel runs do not collide. Prints PASS/FAIL and the time per
# role; exits non-zero when any role fails, with the end of that role's log.
#
#   tests/utils/molecule.sh                 # all roles that have a scenario
#   tests/utils/molecule.sh mig slurm_gate  # only these
#
# Needs molecule in the venv (tests/requirements.txt; VENV overrides .venv). Delegated driver on localhost: no
# container engine, no stdin, no network. Molecule writes its own ansible.cfg for the playbooks it runs; the
# collection is found through ANSIBLE_COLLECTIONS_PATH (the checkout linked under collections/, as `make` does).
set -u -o pipefail

REPO=$(cd "$(dirname "$0")/../.." && pwd)
VENV=${VENV:-$REPO/.venv}
case $VENV in /*) ;; *) VENV=$REPO/$VENV ;; esac
BIN=$VENV/bin
if [ ! -x "$BIN/molecule" ]; then
    echo "molecule.sh: $BIN/molecule not found; install it with: $BIN/python -m pip install -r tests/requirements.txt" >&2
    exit 2
fi
if [ ! -e "$REPO/collections/ansible_collections/continuum/hydra" ]; then
    mkdir -p "$REPO/collections/ansible_collections/continuum"
    ln -sfn ../../.. "$REPO/collections/ansible_collections/continuum/hydra"
fi

if [ $# -gt 0 ]; then
    roles=("$@")
else
    roles=()
    for scenario in "$REPO"/roles/*/molecule/default/molecule.yml; do
        [ -e "$scenario" ] || continue
        role=${scenario#"$REPO"/roles/}
        roles+=("${role%%/*}")
    done
fi
if [ ${#roles[@]} -eq 0 ]; then
    echo "molecule.sh: no roles/<role>/molecule/default/molecule.yml found under $REPO" >&2
    exit 2
fi

WORK=$(mktemp -d "${TMPDIR:-/tmp}/hydra-molecule.XXXXXX")
export PATH="$BIN:$PATH"
export ANSIBLE_CONFIG=$REPO/ansible.cfg
export ANSIBLE_COLLECTIONS_PATH=$REPO/collections
export ANSIBLE_NOCOLOR=1 NO_COLOR=1 PY_COLORS=0
export HYDRA_REPORT_DIR=$WORK/reports

now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
failed=()
start_all=$(now)
for role in "${roles[@]}"; do
    dir=$REPO/roles/$role
    if [ ! -f "$dir/molecule/default/molecule.yml" ]; then
        echo "FAIL $role: no scenario at roles/$role/molecule/default/molecule.yml"
        failed+=("$role")
        continue
    fi
    log=$WORK/$role.log
    mkdir -p "$WORK/$role"
    start=$(now)
    (cd "$dir" && MOLECULE_EPHEMERAL_DIRECTORY=$WORK/$role "$BIN/molecule" test --scenario-name default) \
        </dev/null >"$log" 2>&1
    rc=$?
    took=$(since "$start")
    if [ $rc -eq 0 ]; then
        printf 'PASS %-14s %6s s\n' "$role" "$took"
    else
        printf 'FAIL %-14s %6s s (rc %d), log: %s\n' "$role" "$took" "$rc" "$log"
        tail -n 60 "$log" | sed "s/^/  $role| /"
        failed+=("$role")
    fi
done
printf 'molecule: %d role(s) in %s s\n' "${#roles[@]}" "$(since "$start_all")"

if [ ${#failed[@]} -gt 0 ]; then
    echo "molecule: FAILED: ${failed[*]} (logs kept in $WORK)" >&2
    exit 1
fi
rm -rf "$WORK"
