package lazyre

import "testing"

func TestNew(t *testing.T) {
	re := New(`^a+$`)
	if re() != re() {
		t.Error("compiled twice")
	}
	if !re().MatchString("aaa") || re().MatchString("ab") {
		t.Error("wrong match")
	}
}
