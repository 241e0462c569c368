package e2erun

// The e2e tests run the product binaries, which the product module's
// internal/testbin builds with go test's own settings: linking every
// package they need makes go test compile those packages before TestE2E
// starts, so that their build only links, and the e2e module finds the
// packages it shares with this module in the go build cache.
import _ "github.com/accel-doctor/accel-doctor/internal/testbin/product"
