#!/usr/bin/env bash
# Cut a release in this checkout: tests/utils/release.sh VERSION ["release summary"]
#   - lints the changelog fragments (antsibull-changelog lint),
#   - sets galaxy.yml's version (and doctor's HYDRA_VERSION) to VERSION,
#   - adds a release_summary fragment when a summary is given,
#   - antsibull-changelog release --version VERSION: the fragments move into changelogs/changelog.yaml
#     (keep_fragments: false removes them) and CHANGELOG.md is written,
#   - checks that CHANGELOG.md and changelogs/changelog.yaml name VERSION.
# Changes files only; committing and tagging (vVERSION) stay with whoever runs it. Uses .venv-release.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
version=${1:-}
summary=${2:-}
if ! [[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
    echo "release.sh: bad version '${version}': expected MAJOR.MINOR.PATCH, e.g. 0.2.0" >&2
    exit 2
fi
# shellcheck source=tests/utils/release_venv.sh
. "$repo/tests/utils/release_venv.sh"
cd "$repo"

if grep -qE "^  $(printf '%s' "$version" | sed 's/\./\\./g'):" changelogs/changelog.yaml; then
    echo "release.sh: version $version is already in changelogs/changelog.yaml" >&2
    exit 1
fi
antsibull-changelog lint

current=$(sed -n 's/^version: *//p' galaxy.yml)
if [ "$(grep -c '^version:' galaxy.yml)" -ne 1 ]; then
    echo "release.sh: galaxy.yml must have exactly one top-level 'version:' line" >&2
    exit 1
fi
sed -i "s/^version: .*/version: $version/" galaxy.yml
# The version doctor writes into every host result (tests/unit/test_release_meta.py keeps the two equal).
sed -i "s/^HYDRA_VERSION = .*/HYDRA_VERSION = \"$version\"/" plugins/module_utils/_doctor/run.py
echo "release.sh: galaxy.yml and doctor's HYDRA_VERSION $current -> $version"

if [ -n "$summary" ]; then
    printf -- '---\nrelease_summary: |\n  %s\n' "$summary" > "changelogs/fragments/release-$version.yml"
fi

antsibull-changelog release --version "$version"
antsibull-changelog lint-changelog-yaml changelogs/changelog.yaml

# antsibull-changelog's Markdown escapes the dots: "## v0\.2\.0".
grep -qxF "## v${version//./\\.}" CHANGELOG.md \
    || { echo "release.sh: CHANGELOG.md has no section for v$version" >&2; exit 1; }
echo "release.sh: released $version: galaxy.yml, changelogs/changelog.yaml, CHANGELOG.md updated;" \
    "$(find changelogs/fragments -name '*.yml' | wc -l) fragment(s) left"
