// Package deploytest holds the tests of what the repository ships besides
// the binaries: the manifests in deploy/ (decoded into k8s.io/api types,
// linted by `accel-doctor lint`), the OCI image of the Dockerfile (built
// with buildah, no registry), the kubectl plugin (the binary installed as
// kubectl-accel_doctor) and its krew manifest (deploy/krew). It has no
// code of its own: the server-side dry-run of the manifests against a real
// API server is in the e2e module (e2e/deploy).
package deploytest
