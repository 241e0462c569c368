#!/usr/bin/env bash
# Runs accel-doctor check beside virt-host-validate and lspci -vvv on this
# machine and prints medians, peak RSS and ratios (see bench/main.go).
# Installs the peers with apt when they are missing (needs root).
set -euo pipefail
cd "$(dirname "$0")/.."
missing=()
command -v virt-host-validate >/dev/null || missing+=(libvirt-clients)
command -v lspci >/dev/null || missing+=(pciutils)
[ -x /usr/bin/time ] || missing+=(time)
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi
exec go run ./bench "$@"
