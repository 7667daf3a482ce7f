package descriptors

import (
	"errors"
	"testing"
)

func TestQueueFIFO(t *testing.T) {
	q := NewQueue(4)
	ds := make([]Descriptor, 10)
	var next uint64
	popped := 0
	for round := 0; round < 3; round++ {
		for q.Len() < q.Cap() {
			pos, err := q.Push(&ds[next%10])
			if err != nil {
				t.Fatal(err)
			}
			if pos != next {
				t.Fatalf("position %d, want %d", pos, next)
			}
			next++
		}
		if _, err := q.Push(&ds[0]); !errors.Is(err, ErrQueueFull) {
			t.Fatalf("push on full queue: %v", err)
		}
		for i := 0; i < 3; i++ {
			want := &ds[uint64(popped)%10]
			if q.Head() != want || q.At(q.Front()) != want {
				t.Fatalf("head is not the oldest descriptor")
			}
			if d := q.Pop(); d != want {
				t.Fatalf("pop %d returned the wrong descriptor", popped)
			}
			popped++
		}
	}
	if q.At(q.Front()-1) != nil || q.At(q.Back()) != nil {
		t.Fatal("At returned a descriptor outside [Front, Back)")
	}
	for q.Pop() != nil {
	}
	if q.Len() != 0 || q.Head() != nil {
		t.Fatal("queue not empty after popping everything")
	}
}

func TestQueueNoAllocs(t *testing.T) {
	q := NewQueue(8)
	d := &Descriptor{}
	n := testing.AllocsPerRun(1000, func() {
		q.Push(d)
		q.At(q.Front())
		q.Pop()
	})
	if n != 0 {
		t.Fatalf("%v allocations per push/pop", n)
	}
}

func TestStatusErr(t *testing.T) {
	cases := []struct {
		s    Status
		want error
	}{
		{StatusDone, nil},
		{StatusDone | StatusImmediate, nil},
		{StatusDone | StatusLength, ErrLength},
		{StatusDone | StatusFlushed, ErrFlushed},
		{StatusDone | StatusTransport | StatusFlushed, ErrFlushed},
		{StatusDone | StatusRemoteDescriptor, ErrRemoteDescriptor},
		{StatusDone | StatusRDMAProtection, ErrRDMAProtection},
		{StatusFormat, ErrFormat},
		{StatusProtection, ErrProtection},
		{StatusPartial, ErrPartial},
	}
	for _, c := range cases {
		if got := c.s.Err(); got != c.want {
			t.Errorf("%v.Err() = %v, want %v", c.s, got, c.want)
		}
		if c.s.Failed() != (c.want != nil) {
			t.Errorf("%v.Failed() = %v", c.s, c.s.Failed())
		}
	}
	if s := (StatusDone | StatusLength).String(); s != "done|length" {
		t.Errorf("String = %q", s)
	}
	if s := (StatusDone | StatusRemoteWrite | StatusImmediate).String(); s != "done|remote-write|immediate" {
		t.Errorf("String = %q", s)
	}
	if n := testing.AllocsPerRun(100, func() { _ = (StatusDone | StatusTransport).Err() }); n != 0 {
		t.Errorf("Err allocates %v", n)
	}
}

func TestCheckFormat(t *testing.T) {
	l := Limits{MaxSegments: 2, MaxTransfer: 10}
	buf := make([]byte, 8)
	ok := Descriptor{Segments: []Segment{{Buf: buf}}}
	if err := ok.CheckFormat(l, false); err != nil {
		t.Fatal(err)
	}
	if err := ok.CheckFormat(l, true); err != nil {
		t.Fatal(err)
	}
	bad := []struct {
		d    Descriptor
		recv bool
	}{
		{Descriptor{Control: Control{Op: 7}}, false},
		{Descriptor{Control: Control{Op: OpRDMAWrite}}, true},
		{Descriptor{Control: Control{Fence: true}}, true},
		{Descriptor{Segments: make([]Segment, 3)}, false},
		{Descriptor{Segments: []Segment{{Buf: buf}, {Buf: buf}}}, false},
	}
	for i, c := range bad {
		if err := c.d.CheckFormat(l, c.recv); !errors.Is(err, ErrFormat) {
			t.Errorf("case %d: %v, want a format error", i, err)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = ok.CheckFormat(l, false) }); n != 0 {
		t.Errorf("CheckFormat allocates %v", n)
	}
}

func TestReset(t *testing.T) {
	d := Descriptor{Status: StatusDone | StatusImmediate, Length: 5, ImmData: 9, Segments: make([]Segment, 1)}
	d.Reset()
	if d.Status != 0 || d.Length != 0 || d.ImmData != 0 || len(d.Segments) != 1 {
		t.Fatalf("Reset left %+v", d)
	}
}
