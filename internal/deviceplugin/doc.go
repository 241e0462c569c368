// Package deviceplugin is accel-doctor's Kubernetes device-plugin side:
// a generic plugin (`plugin serve`), a mock with planted failures
// (`plugin mock`) and a kubelet-side contract tester (`plugin test`).
package deviceplugin
