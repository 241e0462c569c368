package report

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// TestSchemaDocumented fails when the JSON report has a field that
// docs/report-schema.md does not describe.
func TestSchemaDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/report-schema.md")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteJSON(&b, sample()); err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b.Bytes(), &v); err != nil {
		t.Fatal(err)
	}
	keys := map[string]bool{}
	collectKeys(v, keys, false)
	for k := range keys {
		if !strings.Contains(string(doc), "`"+k+"`") && !strings.Contains(string(doc), `"`+k+`"`) {
			t.Errorf("JSON field %q is not documented in docs/report-schema.md", k)
		}
	}
}

func collectKeys(v any, keys map[string]bool, inCounts bool) {
	switch x := v.(type) {
	case map[string]any:
		for k, c := range x {
			if !inCounts {
				keys[k] = true
			}
			collectKeys(c, keys, k == "counts")
		}
	case []any:
		for _, c := range x {
			collectKeys(c, keys, false)
		}
	}
}
