// Package product links every package of the product binaries. A test
// file that imports it,
//
//	import _ "github.com/accel-doctor/accel-doctor/internal/testbin/product"
//
// makes go test compile those packages before it starts that test binary
// (they are in its link), with the settings go test compiles with. A
// build by internal/testbin with the same settings (its default) then
// finds every package in the go build cache and only links, instead of
// compiling the product beside go test inside the test's timeout.
package product

import (
	_ "github.com/accel-doctor/accel-doctor/internal/cli"
	_ "github.com/accel-doctor/accel-doctor/internal/enter"
	_ "github.com/accel-doctor/accel-doctor/internal/kubecli"
	_ "github.com/accel-doctor/accel-doctor/internal/kubeletcli"
	_ "github.com/accel-doctor/accel-doctor/internal/sandbox"
)
