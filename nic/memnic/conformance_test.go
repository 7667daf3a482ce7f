package memnic_test

import (
	"testing"

	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/memnic"
	"github.com/ethervia/ethervia/nic/nictest"
)

func makePair(t testing.TB) nictest.Pair {
	sw := memnic.NewSwitch(1)
	cfg := memnic.PortConfig{Config: nic.Config{JobKey: 0xabc}}
	a, err := sw.NewPort(cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := sw.NewPort(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return nictest.Pair{A: a, B: b, EtherType: nic.DefaultEtherType, JobKey: 0xabc}
}

func TestConformance(t *testing.T) { nictest.Run(t, makePair) }

func BenchmarkPingPong64(b *testing.B) { nictest.BenchPingPong(b, makePair(b), 64) }
func BenchmarkStream64(b *testing.B)   { nictest.BenchStream(b, makePair(b), 64) }
