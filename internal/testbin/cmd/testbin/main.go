// Command testbin is internal/testbin for the tests of the e2e module,
// which is a module of its own and cannot import it: it builds the
// product's binaries into the directory every test of a run shares and
// prints that directory.
//
//	go run ./internal/testbin/cmd/testbin [-release] [-static] [-version V] [-timeout D] [PKG...]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/accel-doctor/accel-doctor/internal/testbin"
)

func main() {
	var o testbin.Options
	flag.BoolVar(&o.Release, "release", false, "build as the README does (static, -trimpath, stripped)")
	flag.BoolVar(&o.Static, "static", false, "CGO_ENABLED=0")
	flag.StringVar(&o.Version, "version", "", "stamp this version")
	timeout := flag.Duration("timeout", 0, "stop the build after this long (0: no limit)")
	flag.Parse()
	o.Packages = flag.Args()
	ctx := context.Background()
	if *timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *timeout)
		defer cancel()
	}
	dir, err := testbin.Build(ctx, ".", o)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println(dir)
}
