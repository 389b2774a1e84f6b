# shellcheck shell=bash
# Sourced by release_check.sh and release.sh: makes $release_venv (default .venv-release) from
# tests/requirements-release.txt, again whenever that file's content changes (.installed keeps a copy). Needs $repo.
release_venv=${RELEASE_VENV:-$repo/.venv-release}
release_requirements=$repo/tests/requirements-release.txt
if ! cmp -s "$release_requirements" "$release_venv/.installed"; then
    rm -rf "$release_venv"
    python3 -m venv "$release_venv"
    "$release_venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip 2>&1 | grep -v "^WARNING: Location" || true
    "$release_venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$release_requirements" 2>&1 \
        | grep -v "^WARNING: Location" || true
    "$release_venv/bin/python" -c "import ansible_builder, galaxy_importer, antsibull_changelog" \
        || { echo "release_venv.sh: installing $release_requirements into $release_venv failed" >&2; exit 1; }
    cp "$release_requirements" "$release_venv/.installed"
fi
export PATH="$release_venv/bin:$PATH"
