// Command thirdparty builds the third-party device plugins and DRA driver
// the e2e tests run (harness.AllThirdParty) into the directory the tests
// take them from (harness.ThirdPartyDir), and prints that directory. The
// tests build what is missing themselves; this is for building it
// beforehand (.ci/run, internal/e2erun, which bounds it by its context).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/accel-doctor/accel-doctor/e2e/harness"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	dir, err := harness.ThirdPartyDir()
	if err == nil {
		start := time.Now()
		err = harness.BuildThirdParty(ctx, dir, harness.AllThirdParty...)
		fmt.Fprintf(os.Stderr, "thirdparty: %v\n", time.Since(start).Round(time.Millisecond))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "thirdparty:", err)
		os.Exit(1)
	}
	fmt.Println(dir)
}
