package kubelet

import (
	"errors"
	"fmt"
	"unicode/utf8"
)

// decodeAllocateResponse reads the fields AllocSummary keeps from a
// proto-marshalled deviceplugin v1beta1 ContainerAllocateResponse.
//
// Read by hand, not with the generated type nor with protowire, the
// protobuf module's wire-format reader: the generated package's
// initialisation registers its descriptors and links the protobuf runtime
// and gRPC, which the node binary does not carry (internal/kubeletrpc's
// doc says why), and protowire's dependency internal/detrand opens and
// samples this process's own executable in its package init (0.2 ms and
// 12 syscalls on every start of accel-doctor, measured with
// GODEBUG=inittrace=1 and strace). The wire format is protobuf's
// documented encoding (protobuf.dev/programming-guides/encoding: varints,
// tags of field number and wire type, length-delimited fields, groups).
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
	err := eachField(b, func(num wireNumber, typ wireType, v []byte) error {
		if typ != wireBytes {
			return nil // not a field of ours: skipped
		}
		var field wireNumber
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
		err := eachField(v, func(n wireNumber, t wireType, fv []byte) error {
			if t != wireBytes || n < 1 || int(n) > strings {
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

type (
	wireNumber int32
	wireType   int8
)

// The wire types (encoding guide, "Message Structure").
const (
	wireVarint     wireType = 0
	wireFixed64    wireType = 1
	wireBytes      wireType = 2
	wireStartGroup wireType = 3
	wireEndGroup   wireType = 4
	wireFixed32    wireType = 5
)

// maxFieldNumber is the largest field number (2^29 - 1); maxDepth bounds
// nested groups as the protobuf runtime's default recursion limit does.
const (
	maxFieldNumber = 1<<29 - 1
	maxDepth       = 10000
)

// eachField calls fn with every field of the message b: its number, wire
// type and, for length-delimited fields, its bytes.
func eachField(b []byte, fn func(wireNumber, wireType, []byte) error) error {
	for len(b) > 0 {
		num, typ, n := consumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: a field's tag", errTruncated)
		}
		b = b[n:]
		var v []byte
		if typ == wireBytes {
			v, n = consumeBytes(b)
		} else {
			n = consumeValue(num, typ, b, maxDepth)
		}
		if n < 0 {
			return fmt.Errorf("%w: field %d", errTruncated, num)
		}
		b = b[n:]
		if err := fn(num, typ, v); err != nil {
			return err
		}
	}
	return nil
}

// consumeVarint reads a base-128 varint of at most 10 bytes, the last of
// which may carry one bit; n < 0 when b ends first or it overflows.
func consumeVarint(b []byte) (v uint64, n int) {
	for i := 0; i < 10; i++ {
		if i >= len(b) {
			return 0, -1
		}
		c := b[i]
		if i == 9 && c > 1 {
			return 0, -1
		}
		v |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return v, i + 1
		}
	}
	return 0, -1
}

func consumeTag(b []byte) (wireNumber, wireType, int) {
	v, n := consumeVarint(b)
	if n < 0 || v>>3 < 1 || v>>3 > maxFieldNumber {
		return 0, 0, -1
	}
	return wireNumber(v >> 3), wireType(v & 7), n
}

func consumeBytes(b []byte) ([]byte, int) {
	l, n := consumeVarint(b)
	if n < 0 || l > uint64(len(b)-n) {
		return nil, -1
	}
	return b[n : n+int(l)], n + int(l)
}

// consumeValue skips a field's value of wire type typ.
func consumeValue(num wireNumber, typ wireType, b []byte, depth int) int {
	switch typ {
	case wireVarint:
		_, n := consumeVarint(b)
		return n
	case wireFixed64:
		if len(b) < 8 {
			return -1
		}
		return 8
	case wireFixed32:
		if len(b) < 4 {
			return -1
		}
		return 4
	case wireBytes:
		_, n := consumeBytes(b)
		return n
	case wireStartGroup:
		if depth == 0 {
			return -1
		}
		total := 0
		for {
			gnum, gtyp, n := consumeTag(b)
			if n < 0 {
				return -1
			}
			b, total = b[n:], total+n
			if gtyp == wireEndGroup {
				if gnum != num {
					return -1
				}
				return total
			}
			m := consumeValue(gnum, gtyp, b, depth-1)
			if m < 0 {
				return -1
			}
			b, total = b[m:], total+m
		}
	}
	return -1 // an end group with no start, or a reserved wire type
}
