package kubecli_test

// The tests of this package run the product binaries (testutil.Binaries):
// linking every package they need makes go test compile those packages
// (but this package and those importing it, which this test binary builds
// with its tests) before these tests start, so that the binaries' build
// mostly links.
import _ "github.com/accel-doctor/accel-doctor/internal/testbin/product"
