package kubelet

import (
	"errors"
	"fmt"
	"unicode/utf8"

	"google.golang.org/protobuf/encoding/protowire"
)

// decodeAllocateResponse reads the fields AllocSummary keeps from a
// proto-marshalled deviceplugin v1beta1 ContainerAllocateResponse.
//
// Read with protowire, the protobuf module's wire-format reader, rather
// than the generated type: the generated package's initialisation
// registers its descriptors and links the protobuf runtime and gRPC, which
// the node binary does not carry (internal/kubeletrpc's doc says why).
// The field numbers are those of k8s.io/kubelet's
// pkg/apis/deviceplugin/v1beta1/api.proto:
//
//	ContainerAllocateResponse: envs = 1 (map<string,string>), mounts = 2,
//	  devices = 3, annotations = 4 (map), cdi_devices = 5
//	Mount: container_path = 1, host_path = 2, read_only = 3
//	DeviceSpec: container_path = 1, host_path = 2, permissions = 3
//	CDIDevice: name = 1
//	a map entry: key = 1, value = 2
//
// As proto.Unmarshal does, it refuses malformed wire data and strings that
// are not UTF-8 (proto3), and skips fields it does not know. The tests hold
// it to the generated type's decoding, also under fuzzing.
func decodeAllocateResponse(b []byte) (*AllocSummary, error) {
	s := &AllocSummary{}
	err := eachField(b, func(num protowire.Number, typ protowire.Type, v []byte) error {
		if typ != protowire.BytesType {
			return nil // not a field of ours: skipped
		}
		var field protowire.Number
		var out *[]string
		strings := 2 // the message's string fields are 1..strings
		switch num {
		case 1: // envs: the entry's key
			field, out = 1, &s.EnvNames
		case 2:
			field, out = 2, &s.Mounts
		case 3:
			field, out, strings = 2, &s.DeviceNodes, 3
		case 4: // annotations: only checked
		case 5:
			field, out, strings = 1, &s.CDIDevices, 1
		default:
			return nil
		}
		var got string
		seen := false
		err := eachField(v, func(n protowire.Number, t protowire.Type, fv []byte) error {
			if t != protowire.BytesType || n < 1 || int(n) > strings {
				return nil // a field this version does not know: skipped
			}
			if !utf8.Valid(fv) {
				return fmt.Errorf("field %d.%d: string is not valid UTF-8", num, n)
			}
			if n == field {
				got, seen = string(fv), true // the last occurrence wins
			}
			return nil
		})
		if err != nil {
			return err
		}
		if out != nil {
			if !seen {
				got = "" // a message with the field unset
			}
			*out = append(*out, got)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(s.EnvNames) > 1 {
		// A map repeats a key when it is set twice; the last value wins
		// and there is one key.
		seen := make(map[string]bool, len(s.EnvNames))
		keys := s.EnvNames[:0]
		for _, k := range s.EnvNames {
			if !seen[k] {
				seen[k] = true
				keys = append(keys, k)
			}
		}
		s.EnvNames = keys
	}
	return s, nil
}

var errTruncated = errors.New("cannot parse invalid wire-format data")

// eachField calls fn with every field of the message b: its number, wire
// type and, for length-delimited fields, its bytes.
func eachField(b []byte, fn func(protowire.Number, protowire.Type, []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: %v", errTruncated, protowire.ParseError(n))
		}
		if num > protowire.MaxValidNumber {
			return fmt.Errorf("%w: field number %d", errTruncated, num)
		}
		b = b[n:]
		var v []byte
		if typ == protowire.BytesType {
			v, n = protowire.ConsumeBytes(b)
		} else {
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return fmt.Errorf("%w: field %d: %v", errTruncated, num, protowire.ParseError(n))
		}
		b = b[n:]
		if err := fn(num, typ, v); err != nil {
			return err
		}
	}
	return nil
}
