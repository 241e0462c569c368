// Package archtest holds no code: its test keeps the dependency direction
// of STYLE.md — hostfs -> readers -> diagnose -> report -> cli.
package archtest
