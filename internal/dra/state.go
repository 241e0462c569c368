package dra

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"sort"
)

// StateName is the kubelet's DRA state file, directly under its
// --root-dir: pkg/kubelet/cm/dra/manager.go, draManagerStateFileName,
// passed to NewManager as nodeConfig.KubeletRootDir
// (pkg/kubelet/cm/container_manager_linux.go).
const StateName = "dra_manager_state"

// MaxStateSize bounds what is read of the state file. It holds one entry
// per prepared claim with its devices' names and CDI device IDs: a few
// hundred bytes each, a few hundred KiB for a node full of claims.
const MaxStateSize = 16 << 20

// The state's kind and apiVersion, as the kubelet writes them
// (pkg/kubelet/cm/dra/state/checkpoint.go, CheckpointKind and
// CheckpointAPIVersion). The kubelet does not check them when it reads.
const (
	StateKind       = "DRACheckpoint"
	StateAPIVersion = "checkpoint.dra.kubelet.k8s.io/v1"
)

// State is what a dra_manager_state says.
//
// The file is the JSON of state.Checkpoint{Data string; Checksum uint32}:
// Data is itself JSON text (state.CheckpointData: TypeMeta inline, then
// ClaimInfoStateList), and Checksum is crc32.ChecksumIEEE over Data's
// bytes (NewCheckpoint and VerifyChecksum in
// pkg/kubelet/cm/dra/state/checkpoint.go). The format has no boot ID.
// A state whose checksum differs is refused: GetCheckpoint returns
// CorruptCheckpointError, newClaimInfoCache fails, and with it the DRA
// manager and the kubelet's container manager: the kubelet does not start.
type State struct {
	Kind       string `json:"kind"`
	APIVersion string `json:"api_version"`
	// Stored is the Checksum field, Computed the kubelet's checksum of the
	// Data read; ChecksumOK their equality.
	Stored     uint32 `json:"stored"`
	Computed   uint32 `json:"computed"`
	ChecksumOK bool   `json:"checksum_ok"`
	// DataErr is why Data did not decode as the kubelet's CheckpointData
	// (GetClaimInfoStateList fails the same way: the kubelet does not
	// start); Claims is then empty.
	DataErr string  `json:"data_error,omitempty"`
	Claims  []Claim `json:"claims,omitempty"`
}

// Claim is one ClaimInfoState: a claim the kubelet prepared (or is
// preparing) for the pods it lists.
type Claim struct {
	UID       string        `json:"uid"`
	Name      string        `json:"name"`
	Namespace string        `json:"namespace"`
	PodUIDs   []string      `json:"pod_uids,omitempty"` // sorted
	Drivers   []DriverClaim `json:"drivers,omitempty"`  // by driver name
}

// DriverClaim is what one driver prepared for a claim.
type DriverClaim struct {
	Driver  string        `json:"driver"`
	Devices []ClaimDevice `json:"devices,omitempty"`
	// SkipNodeOperations: the claim's allocation said the kubelet need not
	// call the driver (resourceapi.SkipNodeOperation).
	SkipNodeOperations []string `json:"skip_node_operations,omitempty"`
}

// ClaimDevice is one prepared device.
type ClaimDevice struct {
	Pool     string   `json:"pool"`
	Device   string   `json:"device"`
	ShareID  string   `json:"share_id,omitempty"`
	Requests []string `json:"requests,omitempty"`
	// CDIDeviceIDs are the fully qualified CDI device names the driver's
	// NodePrepareResources answered; the kubelet passes them to the
	// runtime for every container that uses the claim.
	CDIDeviceIDs []string `json:"cdi_device_ids,omitempty"`
}

// The on-disk layout: field names and types are the kubelet's, so that
// encoding/json (case-insensitive keys, null) decodes exactly what the
// kubelet's json.Unmarshal decodes.
type (
	stateFile struct {
		Data     string
		Checksum uint32
	}
	stateData struct {
		Kind               string `json:"kind"`
		APIVersion         string `json:"apiVersion"`
		ClaimInfoStateList []claimInfoState
	}
	claimInfoState struct {
		ClaimUID  string
		ClaimName string
		Namespace string
		// sets.Set[string] is map[string]sets.Empty: JSON object of {}.
		PodUIDs     map[string]struct{}
		DriverState map[string]driverState
	}
	driverState struct {
		Devices            []stateDevice
		SkipNodeOperations []string `json:"skipNodeOperations,omitempty"`
	}
	stateDevice struct {
		PoolName     string
		DeviceName   string
		ShareID      *string
		RequestNames []string
		CDIDeviceIDs []string
	}
)

// ParseState parses a dra_manager_state. An error means the outer JSON
// does not decode (the kubelet refuses the file the same way); a Data that
// does not decode, or a checksum that differs, is reported in the State.
func ParseState(b []byte) (*State, error) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 {
		return nil, errors.New("empty file: not a state the kubelet wrote")
	}
	var f stateFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("not a DRA checkpoint: %w", err)
	}
	s := &State{Stored: f.Checksum, Computed: crc32.ChecksumIEEE([]byte(f.Data))}
	s.ChecksumOK = s.Stored == s.Computed
	var d stateData
	if err := json.Unmarshal([]byte(f.Data), &d); err != nil {
		s.DataErr = err.Error()
		return s, nil
	}
	s.Kind, s.APIVersion = d.Kind, d.APIVersion
	for _, c := range d.ClaimInfoStateList {
		cl := Claim{UID: c.ClaimUID, Name: c.ClaimName, Namespace: c.Namespace}
		for p := range c.PodUIDs {
			cl.PodUIDs = append(cl.PodUIDs, p)
		}
		sort.Strings(cl.PodUIDs)
		for drv, ds := range c.DriverState {
			dc := DriverClaim{Driver: drv, SkipNodeOperations: ds.SkipNodeOperations}
			for _, dv := range ds.Devices {
				cd := ClaimDevice{Pool: dv.PoolName, Device: dv.DeviceName, Requests: dv.RequestNames, CDIDeviceIDs: dv.CDIDeviceIDs}
				if dv.ShareID != nil {
					cd.ShareID = *dv.ShareID
				}
				dc.Devices = append(dc.Devices, cd)
			}
			cl.Drivers = append(cl.Drivers, dc)
		}
		sort.Slice(cl.Drivers, func(i, j int) bool { return cl.Drivers[i].Driver < cl.Drivers[j].Driver })
		s.Claims = append(s.Claims, cl)
	}
	return s, nil
}

// CDIDeviceIDs lists every CDI device ID the state's claims hold, each
// once, in claim order.
func (s *State) CDIDeviceIDs() []string {
	if s == nil {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, c := range s.Claims {
		for _, d := range c.Drivers {
			for _, dv := range d.Devices {
				for _, id := range dv.CDIDeviceIDs {
					if !seen[id] {
						seen[id] = true
						out = append(out, id)
					}
				}
			}
		}
	}
	return out
}
