package timerpool

import (
	"testing"
	"time"
)

func TestReuse(t *testing.T) {
	var p Pool
	a := p.Get()
	a.Reset(time.Millisecond)
	<-a.C
	p.Put(a)
	if b := p.Get(); b != a {
		t.Fatal("a returned timer was not reused")
	}
	if n := testing.AllocsPerRun(100, func() { p.Put(p.Get()) }); n != 0 {
		t.Fatalf("%v allocations per Get/Put", n)
	}
}
