#!/usr/bin/env bash
# Release readiness, in .venv-release (tests/requirements-release.txt): changelog fragments lint, the collection
# tarball builds, ansible-builder accepts execution-environment.yml (and builds it where a container engine runs),
# galaxy-importer accepts the tarball (its ansible-test container run off: tests/utils/galaxy-importer.cfg).
# Works on a copy of the checkout (tracked + untracked-not-ignored files); writes nothing into the repo.
# Every step runs; the exit status is non-zero when any failed, and the failed steps are named at the end.
set -uo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tests/utils/release_venv.sh
. "$repo/tests/utils/release_venv.sh"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
src=$work/src
mkdir -p "$src" "$work/dist"
(cd "$repo" && git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$src" 2>/dev/null)

failed=()
step() { echo "release_check.sh: == $1"; }
fail() { echo "release_check.sh: FAILED: $1" >&2; failed+=("$1"); }

step "antsibull-changelog lint"
(cd "$src" && antsibull-changelog lint) || fail "antsibull-changelog lint"

# Galaxy requires a `repository` URL and this project has no public repository yet, so galaxy.yml carries none
# (no placeholder). The importer checks the copy with HYDRA_GALAXY_REPOSITORY, by default the collection's page on
# Galaxy; set the real repository in galaxy.yml before publishing (docs/release.md).
if ! grep -q "^repository:" "$src/galaxy.yml"; then
    repository=${HYDRA_GALAXY_REPOSITORY:-https://galaxy.ansible.com/ui/repo/published/continuum/hydra/}
    echo "release_check.sh: galaxy.yml has no repository (Galaxy needs one to publish): checking the copy with $repository"
    echo "repository: $repository" >>"$src/galaxy.yml"
fi

step "ansible-galaxy collection build"
if (cd "$src" && ansible-galaxy collection build --force --output-path "$work/dist" >/dev/null); then
    tarball=$(ls "$work/dist"/continuum-hydra-*.tar.gz)
    echo "release_check.sh: $(basename "$tarball"): $(du -k "$tarball" | cut -f1) KiB, $(tar tzf "$tarball" | wc -l) entries"
else
    tarball=""
    fail "ansible-galaxy collection build"
fi

step "ansible-builder create"
if [ -n "$tarball" ]; then
    mkdir -p "$src/build" && cp "$tarball" "$src/build/continuum-hydra.tar.gz"
    context=$work/ee-context
    if ansible-builder create -f "$src/execution-environment.yml" -c "$context" --output-filename Containerfile >/dev/null \
        && [ -s "$context/Containerfile" ] && [ -s "$context/_build/collection/continuum-hydra.tar.gz" ] \
        && grep -q "ansible-galaxy collection install" "$context/Containerfile"; then
        echo "release_check.sh: build context with Containerfile, collection tarball and requirements"
    else
        fail "ansible-builder create (no Containerfile, or the collection tarball is not in the context)"
    fi
    engine=""
    for candidate in podman docker; do
        if command -v "$candidate" >/dev/null 2>&1 && "$candidate" info >/dev/null 2>&1; then engine=$candidate; break; fi
    done
    if [ -n "$engine" ]; then
        step "ansible-builder build ($engine)"
        ansible-builder build -f "$src/execution-environment.yml" -c "$context" --container-runtime "$engine" \
            -t continuum-hydra-ee:check || fail "ansible-builder build"
    else
        echo "release_check.sh: ansible-builder build SKIPPED: no working container engine (podman/docker info failed)"
    fi
fi

step "galaxy-importer"
if [ -n "$tarball" ]; then
    log=$work/importer.log
    # The importer writes importer_result.json into its working directory: run it in $work.
    (cd "$work" && GALAXY_IMPORTER_CONFIG=$repo/tests/utils/galaxy-importer.cfg \
        python -m galaxy_importer.main "$tarball" >"$log" 2>&1)
    rc=$?
    grep -vE "^(Loading |\.\.\.)" "$log"
    warnings=$(grep -c "^WARNING" "$log")
    if [ "$rc" -ne 0 ] || grep -qE "^(ERROR|CRITICAL)" "$log" || ! grep -q "completed successfully" "$log"; then
        fail "galaxy-importer (exit $rc)"
    else
        echo "release_check.sh: galaxy-importer passed, $warnings warning(s)"
    fi
fi

if [ ${#failed[@]} -ne 0 ]; then
    echo "release_check.sh: ${#failed[@]} step(s) failed: ${failed[*]}" >&2
    exit 1
fi
echo "release_check.sh: all release checks passed"
