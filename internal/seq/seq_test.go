package seq

import (
	"math"
	"testing"
)

func TestWrapAround(t *testing.T) {
	for _, c := range []struct {
		a, b uint32
		less bool
	}{
		{0, 1, true},
		{1, 0, false},
		{5, 5, false},
		{math.MaxUint32, 0, true}, // 0 follows MaxUint32
		{0, math.MaxUint32, false},
		{math.MaxUint32 - 10, 20, true},
		{0, 1<<31 - 1, true},
		{1<<31 - 1, 0, false},
	} {
		if got := Less(c.a, c.b); got != c.less {
			t.Errorf("Less(%d, %d) = %v, want %v", c.a, c.b, got, c.less)
		}
		if got := LessEq(c.a, c.b); got != (c.less || c.a == c.b) {
			t.Errorf("LessEq(%d, %d) = %v", c.a, c.b, got)
		}
		if got := Diff(c.a, c.b) < 0; got != c.less {
			t.Errorf("Diff(%d, %d) = %d", c.a, c.b, Diff(c.a, c.b))
		}
	}
	if d := Diff(2, math.MaxUint32); d != 3 {
		t.Errorf("Diff(2, MaxUint32) = %d, want 3", d)
	}
}
