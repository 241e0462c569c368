#!/bin/sh
# gpu-probe.sh: one short run of the functional probe's real path on a
# machine with an NVIDIA GPU and its driver. Nothing in the test suite
# needs it; it records what the probe saw where the stand-in libraries of
# the tests cannot go (the real libcuda.so.1 and libnvidia-ml.so.1, a real
# DRM node), as a record of a run on a machine with a GPU.
#
#   bench/gpu-probe.sh [OUTDIR]
#
# BIN_DIR=dir with prebuilt accel-doctor and accel-doctor-cuda (built
# with CGO_ENABLED=0) skips the build, for a machine without Go. Writes
# only under OUTDIR (default: a new temporary directory) and prints a
# summary; allocates 1 MiB on each GPU per probe run. Takes well under a
# minute.
set -eu

out=${1:-$(mktemp -d /tmp/gpu-probe.XXXXXX)}
mkdir -p "$out"
if [ -n "${BIN_DIR:-}" ]; then
	bin=$BIN_DIR
else
	bin=$out/bin
	mkdir -p "$bin"
	cd "$(dirname "$0")/.."
	CGO_ENABLED=0 go build -o "$bin/accel-doctor" ./cmd/accel-doctor
	CGO_ENABLED=0 go build -o "$bin/accel-doctor-cuda" ./cmd/accel-doctor-cuda
fi
ad=$bin/accel-doctor
helper=$bin/accel-doctor-cuda

section() { printf '\n== %s\n' "$*"; }

section machine
uname -r
cat /proc/driver/nvidia/version 2>/dev/null || echo "no /proc/driver/nvidia/version"
ls -l /dev/nvidia* /dev/dri 2>&1 | head -40
command -v nvidia-smi >/dev/null && nvidia-smi -L 2>&1 | head -16 || echo "no nvidia-smi"
ls -l "$ad" "$helper"

section "probe, text (exit status follows)"
rc=0
"$ad" probe -v --cuda-helper "$helper" --termination-log "" >"$out/probe.txt" 2>&1 || rc=$?
cat "$out/probe.txt"
echo "exit $rc"

section "probe facts (JSON in $out/probe-facts.json)"
"$ad" probe --facts --cuda-helper "$helper" --termination-log "" >"$out/probe-facts.json" 2>&1 || true
grep -E '"(name|code_name|value|error|loaded|found|not_run)"' "$out/probe-facts.json" | head -80

section "the helper alone (JSON lines in $out/helper.jsonl)"
"$helper" --lib nvml --lib cuda >"$out/helper.jsonl" 2>"$out/helper.err" || echo "helper exit $?"
cat "$out/helper.jsonl" "$out/helper.err"

section "a forced failure: CUDA_VISIBLE_DEVICES selects nothing (expect CUDA_ERROR_NO_DEVICE)"
CUDA_VISIBLE_DEVICES= "$ad" probe --cuda-helper "$helper" --termination-log "" -o json >"$out/probe-novisible.json" 2>&1 || true
grep -o '"summary": "[^"]*cu[A-Za-z_]*[^"]*"' "$out/probe-novisible.json" | head -5

section "wall time of 10 probe runs without the libraries, then with them"
for mode in --no-libraries ""; do
	start=$(date +%s%N)
	i=0
	while [ $i -lt 10 ]; do
		"$ad" probe $mode --cuda-helper "$helper" --termination-log "" -o json >/dev/null 2>&1 || true
		i=$((i + 1))
	done
	end=$(date +%s%N)
	echo "probe ${mode:-(with NVML and CUDA)}: $(((end - start) / 10000000)) ms per run"
done

section done
echo "results in $out"
