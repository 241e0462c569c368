package pci

import "testing"

func TestParseAddress(t *testing.T) {
	tests := []struct {
		in   string
		want Address
		str  string
		ok   bool
	}{
		{"0000:17:00.0", Address{0, 0x17, 0, 0}, "0000:17:00.0", true},
		{"0035:05:1f.7", Address{0x35, 5, 0x1f, 7}, "0035:05:1f.7", true},
		{"10000:e0:06.0", Address{0x10000, 0xe0, 6, 0}, "10000:e0:06.0", true}, // VMD domain
		{"ABCD:EF:01.2", Address{0xabcd, 0xef, 1, 2}, "abcd:ef:01.2", true},
		{"17:00.0", Address{0, 0x17, 0, 0}, "0000:17:00.0", true},
		{"0000:17:20.0", Address{}, "", false}, // device > 31
		{"0000:17:00.8", Address{}, "", false}, // function > 7
		{"000:17:00.0", Address{}, "", false},
		{"123456789:17:00.0", Address{}, "", false},
		{"0000:170:00.0", Address{}, "", false},
		{"0000:17:00.0 ", Address{}, "", false},
		{"0000:17-00.0", Address{}, "", false},
		{"0000:1g:00.0", Address{}, "", false},
		{"+000:17:00.0", Address{}, "", false},
		{"pci0000:17", Address{}, "", false},
		{"", Address{}, "", false},
		{"0000:0000:17:00.0", Address{}, "", false},
	}
	for _, tt := range tests {
		got, err := ParseAddress(tt.in)
		if (err == nil) != tt.ok {
			t.Errorf("ParseAddress(%q) error = %v, want ok=%v", tt.in, err, tt.ok)
			continue
		}
		if !tt.ok {
			continue
		}
		if got != tt.want || got.String() != tt.str {
			t.Errorf("ParseAddress(%q) = %+v (%s), want %+v (%s)", tt.in, got, got, tt.want, tt.str)
		}
	}
}

func TestAddressCompare(t *testing.T) {
	a := []Address{{0, 0, 0, 0}, {0, 0, 0, 1}, {0, 0, 1, 0}, {0, 1, 0, 0}, {1, 0, 0, 0}, {0x10000, 0, 0, 0}}
	for i := range a {
		for j := range a {
			want := 0
			if i < j {
				want = -1
			} else if i > j {
				want = 1
			}
			if got := a[i].Compare(a[j]); got != want {
				t.Errorf("%s.Compare(%s) = %d, want %d", a[i], a[j], got, want)
			}
		}
	}
}

func FuzzParseAddress(f *testing.F) {
	for _, s := range []string{"0000:17:00.0", "17:00.0", "10000:e0:06.0", "ffff:ff:1f.7", "0:0:0.0", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAddress(s)
		if err != nil {
			return
		}
		// What parses prints in the kernel's form and parses back.
		b, err := ParseAddress(a.String())
		if err != nil || b != a {
			t.Fatalf("round trip of %q: %q -> %+v, %v", s, a.String(), b, err)
		}
		if a.Dev > 31 || a.Fn > 7 {
			t.Fatalf("%q parsed out of range: %+v", s, a)
		}
	})
}
