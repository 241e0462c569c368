// Package lazyre compiles a package-level regular expression on its first
// use. A regexp.MustCompile in a var block runs at every start of the
// binary, whatever the command: most runs of check never match these.
package lazyre

import (
	"regexp"
	"sync"
)

// New returns a function that compiles expr once, when first called, and
// then returns the same *regexp.Regexp. An invalid expr panics on that
// call, as regexp.MustCompile does.
func New(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}
