package localaddr

import (
	"net"
	"testing"
)

func TestTowardLoopback(t *testing.T) {
	ip, err := Toward(net.IPv4(127, 0, 0, 1))
	if err != nil || !ip.IsLoopback() {
		t.Fatalf("toward 127.0.0.1: %v, %v", ip, err)
	}
}
