#!/usr/bin/env bash
# Install the Debian packages the test suite drives for real. Idempotent: does nothing when all are present.
set -euo pipefail
packages=(openssh-client openssh-server iperf3 slurm-wlm munge chromium prometheus-node-exporter prometheus libxml2-utils shellcheck gcc)
missing=()
for pkg in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "system-deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
