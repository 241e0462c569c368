package diagnose

// Layer checks for cgroup: filled in by the layer's own work.

var cgroupCodes []Code

func cgroupChecks() []Check { return nil }
