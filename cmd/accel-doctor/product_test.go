package main

// Some tests here run the three binaries side by side (product in
// main_test.go): linking every package they need makes go test compile
// those packages before these tests start, so that their build only links.
import _ "github.com/accel-doctor/accel-doctor/internal/testbin/product"
