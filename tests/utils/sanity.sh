#!/usr/bin/env bash
# ansible-test sanity on a copy of the checkout laid out as ansible_collections/continuum/hydra
# (ansible-test refuses a symlinked collection root).
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
venv=${VENV:-$repo/.venv}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
dest=$work/ansible_collections/continuum/hydra
mkdir -p "$dest"
# Tracked and untracked-but-not-ignored files: what a clean clone plus work in progress holds.
(cd "$repo" && git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$dest" 2>/dev/null)

cd "$dest" || exit 1
sanity() { PATH=$venv/bin:$PATH ansible-test sanity --python 3.11 --color no "$@"; }

# ansible-test bootstraps pip from a download; where that fails (no general internet access),
# give it the offline equivalent in its cache and run again.
log=$work/sanity.log
if sanity "$@" 2>&1 | tee "$log"; then exit 0; fi
grep -q "Download failed" "$log" || exit 1
pip_version=$(grep -oE "get_pip_[0-9_]+\.py" "$log" | head -n1)
[ -n "$pip_version" ] || { echo "sanity.sh: cannot tell which get-pip script ansible-test wants" >&2; exit 1; }
mkdir -p "$HOME/.ansible/test/cache"
cp "$repo/tests/utils/get_pip_offline.py" "$HOME/.ansible/test/cache/$pip_version"
echo "sanity.sh: installed the offline pip bootstrap as ~/.ansible/test/cache/$pip_version; running again"
sanity "$@"
