// Package cli holds accel-doctor's cobra commands, one file each. Commands
// are thin: they open a host root, call the readers and diagnose, and render
// a report. Only `sandbox` writes to the host, and its help says so.
package cli
