# The accel-doctor image: the three static binaries and nothing else.
#
#   CGO_ENABLED=0 go build -trimpath -tags=grpcnotrace -ldflags="-s -w -X github.com/accel-doctor/accel-doctor/internal/cli.Version=$V" \
#     -o build/ ./cmd/accel-doctor ./cmd/accel-doctor-kubelet ./cmd/accel-doctor-kube
#   buildah build -f Dockerfile --build-arg VERSION=$V -t accel-doctor:$V build/     # or: docker build -f Dockerfile build/
#
# The build context is the directory holding the binaries (build/ above),
# not the repository: the image is made from what `go build` made, with no
# Go toolchain image to pull (deploy/README.md). internal/deploytest builds
# it this way with buildah.
#
# FROM scratch: the binaries are static (CGO_ENABLED=0), and diagnosis
# needs no shell, libc or CA bundle (the in-cluster client's CA comes from
# the ServiceAccount's mount). The dynamically linked CUDA/NVML companion
# (cmd/accel-doctor-cuda) is not here: it needs the host's driver libraries,
# which a scratch image does not have.
FROM scratch

# The version the binaries were built with (their -X ...cli.Version).
ARG VERSION=dev

# Side by side: accel-doctor runs accel-doctor-kubelet, found beside its own
# executable, for plugin serve/mock/test and for layer 6's calls on the
# kubelet's sockets, and accel-doctor-kube for lint, cluster, agent, claim
# and dra (internal/cli ext.go).
COPY accel-doctor accel-doctor-kubelet accel-doctor-kube /usr/bin/

# PATH for `kubectl exec ... -- accel-doctor ...`, and accel-doctor's second
# way to find the other two.
ENV PATH=/usr/bin

# root (0): the checks read what root owns on the host (/proc/PID of other
# users' and root's processes, the kubelet's sockets and checkpoint,
# BPF device programs with CAP_SYS_ADMIN), and a non-root user would make
# most of them NOT_RUN. The manifests in deploy/ still drop every capability
# but the three the agent needs, and the probe gate runs as the workload's
# user (runAsUser overrides this).
USER 0:0

ENTRYPOINT ["/usr/bin/accel-doctor"]
CMD ["--help"]

LABEL org.opencontainers.image.title="accel-doctor" \
      org.opencontainers.image.description="Finds why an accelerator is visible but unusable in a container or a Kubernetes pod, layer by layer" \
      org.opencontainers.image.source="https://github.com/accel-doctor/accel-doctor" \
      org.opencontainers.image.version="$VERSION"
