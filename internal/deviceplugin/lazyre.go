package deviceplugin

import (
	"regexp"
	"sync"
)

// lazyRegexp compiles expr on first use. A compile at package init runs on
// every start of the binary, whatever the command; most runs of check never
// match these.
func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}
