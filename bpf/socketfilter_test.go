package bpf

import (
	"testing"

	"golang.org/x/net/bpf"

	"github.com/ethervia/ethervia/nic"
)

// socketVM runs the raw program the way the kernel would, in x/net/bpf's VM.
func socketVM(t testing.TB, f nic.Filter) *bpf.VM {
	t.Helper()
	raw, err := SocketFilter(f)
	if err != nil {
		t.Fatalf("SocketFilter: %v", err)
	}
	insns, ok := bpf.Disassemble(raw)
	if !ok {
		t.Fatalf("SocketFilter produced instructions that do not disassemble: %v", insns)
	}
	vm, err := bpf.NewVM(insns)
	if err != nil {
		t.Fatalf("NewVM: %v", err)
	}
	return vm
}

// kept is what the kernel keeps of a frame for a filter verdict: the VM
// returns the program's value as is, the kernel caps it at the frame length.
func kept(t testing.TB, vm *bpf.VM, b []byte) int {
	t.Helper()
	n, err := vm.Run(b)
	if err != nil {
		t.Fatalf("VM: %v", err)
	}
	return min(n, len(b))
}

func TestSocketFilter(t *testing.T) {
	vm := socketVM(t, testFilter)
	cases := []struct {
		name   string
		frame  []byte
		accept bool
	}{
		{"ours minimal", ours(nic.PrefixLen), true},
		{"ours full", ours(1514), true},
		{"ours jumbo", ours(9014), true},
		{"every endpoint", toEndpoint(ours(64), nic.EndpointAll), true},
		{"another endpoint", toEndpoint(ours(64), 1), false},
		{"wrong ethertype", frame(64, testEtherType+1, nic.Version, testJobKey), false},
		{"ipv4", frame(64, 0x0800, 0x45, 0), false},
		{"wrong version", frame(64, testEtherType, nic.Version+1, testJobKey), false},
		{"version zero", frame(64, testEtherType, 0, testJobKey), false},
		{"wrong key low bit", frame(64, testEtherType, nic.Version, testJobKey^1), false},
		{"wrong key high bit", frame(64, testEtherType, nic.Version, testJobKey^0x80000000), false},
		{"short by one", ours(nic.PrefixLen)[:nic.PrefixLen-1], false},
		{"ethernet header only", ours(nic.PrefixLen)[:nic.EthHeaderLen], false},
		{"empty", nil, false},
	}
	for _, c := range cases {
		n := kept(t, vm, c.frame)
		if c.accept && n != len(c.frame) {
			t.Errorf("%s: kept %d of %d bytes, want the whole frame", c.name, n, len(c.frame))
		}
		if !c.accept && n != 0 {
			t.Errorf("%s: accepted (%d bytes), want rejected", c.name, n)
		}
	}
}

func TestSocketFilterOtherKeys(t *testing.T) {
	// The constants really come from the filter: another job's filter
	// rejects our frames and accepts its own.
	other := nic.Filter{EtherType: 0x88B6, JobKey: 7}
	vm := socketVM(t, other)
	if n := kept(t, vm, ours(64)); n != 0 {
		t.Errorf("other job's filter accepted our frame")
	}
	if n := kept(t, vm, frame(64, 0x88B6, nic.Version, 7)); n != 64 {
		t.Errorf("other job's filter rejected its own frame (kept %d)", n)
	}
}

func TestSocketFilterRejectsZeroEtherType(t *testing.T) {
	if _, err := SocketFilter(nic.Filter{JobKey: 1}); err == nil {
		t.Error("SocketFilter with EtherType 0 succeeded")
	}
}

// FuzzSocketFilter checks the classic filter against nic.Filter.Check, the
// software definition of "our frame", on arbitrary input.
func FuzzSocketFilter(f *testing.F) {
	f.Add(ours(nic.PrefixLen), uint16(testEtherType), uint32(testJobKey))
	f.Add(ours(100), uint16(testEtherType), uint32(testJobKey^1))
	f.Add(ours(nic.PrefixLen)[:21], uint16(testEtherType), uint32(testJobKey))
	f.Add(frame(60, 0x0800, 0x45, 0), uint16(0x0800), uint32(0))
	f.Fuzz(func(t *testing.T, b []byte, et uint16, key uint32) {
		if et == 0 {
			return
		}
		flt := nic.Filter{EtherType: et, JobKey: key}
		vm := socketVM(t, flt)
		n := kept(t, vm, b)
		want := flt.Check(b) == nil
		if got := n > 0; got != want {
			t.Fatalf("filter accepted=%v, Check accepted=%v for % x", got, want, b)
		}
		if want && n != len(b) {
			t.Fatalf("kept %d of %d bytes", n, len(b))
		}
	})
}
