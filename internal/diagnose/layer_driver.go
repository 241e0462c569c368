package diagnose

// Layer checks for driver: filled in by the layer's own work.

var driverCodes []Code

func driverChecks() []Check { return nil }
