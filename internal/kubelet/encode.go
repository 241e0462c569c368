package kubelet

import (
	"encoding/json"
	"fmt"
	"path"

	"github.com/accel-doctor/accel-doctor/internal/hostfs"
)

// EncodeCheckpoint writes cp as a kubelet of the v2 layout would
// (FormatV2BootID when cp.BootID is set), with the checksum the kubelet
// computes, for fixture trees and the demo: the file a node's device
// manager leaves after admitting these allocations. Device IDs of an
// allocation go under the NUMA nodes cp gives them (-1 when none); its
// Response's CDI devices and device nodes are kept as the kubelet keeps
// the plugin's ContainerAllocateResponse (field numbers: allocresp.go),
// nothing when it has none.
func EncodeCheckpoint(cp *Checkpoint) ([]byte, error) {
	d := dataV2{RegisteredDevices: map[string][]string{}}
	for r, ids := range cp.Registered {
		d.RegisteredDevices[r] = append([]string{}, ids...)
	}
	for _, a := range cp.Entries {
		e := entryV2{PodUID: a.PodUID, ContainerName: a.Container, ResourceName: a.Resource, DeviceIDs: map[int64][]string{}}
		for _, id := range a.DeviceIDs {
			nodes := a.NUMA[id]
			if len(nodes) == 0 {
				nodes = []int64{-1}
			}
			for _, n := range nodes {
				e.DeviceIDs[n] = append(e.DeviceIDs[n], id)
			}
		}
		if r := a.Response; r != nil {
			for _, n := range r.DeviceNodes {
				e.AllocResp = appendBytesField(e.AllocResp, 3, appendBytesField(appendBytesField(nil, 1, []byte(n)), 2, []byte(n)))
			}
			for _, m := range r.Mounts { // Mount: container_path = 1, host_path = 2
				e.AllocResp = appendBytesField(e.AllocResp, 2, appendBytesField(appendBytesField(nil, 1, []byte(m)), 2, []byte(m)))
			}
			for _, c := range r.CDIDevices {
				e.AllocResp = appendBytesField(e.AllocResp, 5, appendBytesField(nil, 1, []byte(c)))
			}
		}
		d.PodDeviceEntries = append(d.PodDeviceEntries, e)
	}
	b, err := json.Marshal(fileV2{Data: d, Checksum: checksumV2(&d), BootID: cp.BootID})
	if err != nil {
		return nil, fmt.Errorf("encode checkpoint: %w", err)
	}
	return b, nil
}

// CaptureFile is where a snapshot keeps n (under hostfs.CapturedDir) and
// what it holds there: what a snapshot taken on a node whose kubelet
// showed n records, for fixture trees and the demo.
func CaptureFile(n *Node) (string, []byte) {
	return path.Join(hostfs.CapturedDir, captureName(n.KubeletDir)), n.marshalCapture()
}

// appendBytesField appends a length-delimited protobuf field (wire type
// 2) of number num holding v.
func appendBytesField(b []byte, num uint64, v []byte) []byte {
	b = appendVarint(b, num<<3|2)
	b = appendVarint(b, uint64(len(v)))
	return append(b, v...)
}

func appendVarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}
