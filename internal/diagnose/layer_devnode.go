package diagnose

// Layer checks for devnode: filled in by the layer's own work.

var devnodeCodes []Code

func devnodeChecks() []Check { return nil }
