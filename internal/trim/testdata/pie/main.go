// A program that trims its image, then keeps working: built as a PIE by
// TestImagePIE, whose relocated read-only data a trim must not discard.
package main

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/accel-doctor/accel-doctor/internal/trim"
)

func main() {
	trim.Image()
	// Interfaces, maps, sorting, formatting: code and read-only data
	// (itabs, type descriptors) all over the image, after the trim.
	m := map[string]int{}
	for i, w := range strings.Fields("the trim must not bring back an unrelocated page") {
		m[w] = i
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var err error = fmt.Errorf("%d words", len(keys))
	fmt.Fprintf(os.Stdout, "ok %s %v\n", strings.Join(keys, ","), err)
}
