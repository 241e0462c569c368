package testutil

// DeviceRuleCase is a device rule set and what the kernel does with it to
// the memory devices (DeviceRuleNodes) for each access in
// DeviceRuleAccesses. One table serves the evaluator's pure tests
// (internal/cgroup) and the real-kernel comparison of the sandbox with
// runc's own program and writer (internal/sandbox), so the two test the
// same tuples. The expectations are written by hand from the kernel's
// rules (security/device_cgroup.c) and runc's program generator
// (devicefilter.go in github.com/opencontainers/cgroups), not computed.
type DeviceRuleCase struct {
	Name string
	// Default is where the rules start from: "allow" or "deny".
	Default string
	// Rules are applied in order, written as the sandbox's flags read:
	// "allow c 1:* r", "deny c 1:9 w", "allow a".
	Rules []string
	// Want gives, per node ("1:3"), the outcome of r, w, rw and m in that
	// order: 'Y' allowed, 'N' EPERM, 'P' EPERM on the v1 devices
	// controller but allowed by a v2 program as runc generates it (a deny
	// rule over allow-all that covers only part of the access:
	// match_exception_partial on v1, a subset test in runc's program).
	Want map[string]string
}

// DeviceRuleNode is a node of DeviceRuleNodes.
type DeviceRuleNode struct {
	Path         string
	Major, Minor uint32
}

// DeviceRuleNodes are real character devices whose driver (mem) every
// Linux host has; opening them is harmless (nothing is read or written).
var DeviceRuleNodes = []DeviceRuleNode{
	{"/dev/null", 1, 3}, {"/dev/zero", 1, 5}, {"/dev/full", 1, 7}, {"/dev/random", 1, 8}, {"/dev/urandom", 1, 9},
}

// DeviceRuleAccesses are the accesses of Want, in its order: an open with
// O_RDONLY, O_WRONLY and O_RDWR, and mknod.
var DeviceRuleAccesses = []string{"r", "w", "rw", "m"}

// DeviceRuleCases: both defaults, r, w and m rules mixed, merges, take-backs,
// a reset in the middle, wildcards.
var DeviceRuleCases = []DeviceRuleCase{
	{
		// Once, a per-bit generator let the O_RDWR open of 1:9 through.
		Name: "one rule must cover the whole access", Default: "deny",
		Rules: []string{"allow c 1:* r", "allow c 1:9 w"},
		Want:  map[string]string{"1:3": "YNNN", "1:5": "YNNN", "1:7": "YNNN", "1:8": "YNNN", "1:9": "YYNN"},
	},
	{
		// Identical lines add up (dev_exception_add); 1:8 w alone.
		Name: "identical lines merge", Default: "deny",
		Rules: []string{"allow c 1:3 r", "allow c 1:3 w", "allow c 1:5 rw", "allow c *:* m", "allow c 1:8 w"},
		Want:  map[string]string{"1:3": "YYYY", "1:5": "YYYY", "1:7": "NNNY", "1:8": "NYNY", "1:9": "NNNY"},
	},
	{
		// A deny takes access off the identical line only (dev_exception_rm).
		Name: "deny takes back from the identical line", Default: "deny",
		Rules: []string{"allow c 1:3 rwm", "allow c 1:5 rw", "allow c 1:9 rm", "deny c 1:3 w", "deny c 1:5 r", "deny c 1:9 m"},
		Want:  map[string]string{"1:3": "YNNY", "1:5": "NYNN", "1:7": "NNNN", "1:8": "NNNN", "1:9": "YNNN"},
	},
	{
		// Over allow-all a deny of w (or r) alone: v1 refuses O_RDWR, runc's
		// program lets it through.
		Name: "deny part of an O_RDWR open", Default: "allow",
		Rules: []string{"deny c 1:9 w", "deny c 1:8 r", "deny c 1:7 m", "deny c 1:5 rw"},
		Want:  map[string]string{"1:3": "YYYY", "1:5": "NNNY", "1:7": "YYYN", "1:8": "NYPY", "1:9": "YNPY"},
	},
	{
		// In default-allow mode an allow takes access off the identical deny.
		Name: "allow takes back from the identical deny", Default: "allow",
		Rules: []string{"deny c 1:5 rwm", "allow c 1:5 w", "deny c *:* m", "deny c 1:9 rw", "allow c 1:9 r"},
		Want:  map[string]string{"1:3": "YYYN", "1:5": "NYPN", "1:7": "YYYN", "1:8": "YYYN", "1:9": "YNPN"},
	},
	{
		// "a" resets the default and drops what came before.
		Name: "allow a in the middle resets", Default: "deny",
		Rules: []string{"allow c 1:3 rwm", "allow a", "deny c 1:5 rw", "deny c *:* m", "deny c 1:8 w"},
		Want:  map[string]string{"1:3": "YYYN", "1:5": "NNNN", "1:7": "YYYN", "1:8": "YNPN", "1:9": "YYYN"},
	},
	{
		// "deny c 1:* w" names no earlier line identically: it takes nothing
		// away, on v1 and in runc alike, so 1:3 and 1:5 stay writable.
		Name: "a wider deny leaves narrower lines alone", Default: "deny",
		Rules: []string{"allow c 1:3 rw", "allow c 1:5 rwm", "deny c 1:* w", "allow c *:* m"},
		Want:  map[string]string{"1:3": "YYYY", "1:5": "YYYY", "1:7": "NNNY", "1:8": "NNNY", "1:9": "NNNY"},
	},
	{
		Name: "wildcard majors and minors", Default: "deny",
		Rules: []string{"allow c *:9 rw", "allow c 1:* m", "allow c 1:7 w", "allow c *:3 r"},
		Want:  map[string]string{"1:3": "YNNY", "1:5": "NNNY", "1:7": "NYNY", "1:8": "NNNY", "1:9": "YYYY"},
	},
	{
		// Each of r and w is denied on its own, yet runc's program lets
		// O_RDWR of 1:3 through: no single deny rule covers rw.
		Name: "denies of r and w from different lines", Default: "allow",
		Rules: []string{"deny c 1:* r", "deny c 1:3 w", "deny c 1:9 rwm"},
		Want:  map[string]string{"1:3": "NNPY", "1:5": "NYPY", "1:7": "NYPY", "1:8": "NYPY", "1:9": "NNNN"},
	},
	{
		Name: "deny everything", Default: "deny",
		Want: map[string]string{"1:3": "NNNN", "1:5": "NNNN", "1:7": "NNNN", "1:8": "NNNN", "1:9": "NNNN"},
	},
	{
		Name: "allow everything", Default: "allow",
		Want: map[string]string{"1:3": "YYYY", "1:5": "YYYY", "1:7": "YYYY", "1:8": "YYYY", "1:9": "YYYY"},
	},
}
