// Package e2erun holds one test, TestE2E, that runs the tests of the e2e
// module (../../e2e, a separate Go module that requires k8s.io/kubernetes,
// which this module must not) from this module's `go test ./...`: a pattern
// stops at a nested go.mod, and CI runs that one command. It has no code of
// its own.
package e2erun
