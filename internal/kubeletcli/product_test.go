package kubeletcli_test

// The tests of this package run the product binaries (testutil.Binaries):
// linking every package they need makes go test compile those packages
// before these tests start, so that the binaries' build only links.
import _ "github.com/accel-doctor/accel-doctor/internal/testbin/product"
