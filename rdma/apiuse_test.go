package rdma

import "testing"

func TestAccessString(t *testing.T) {
	for a, want := range map[Access]string{
		0:                                     "local-read",
		LocalWrite:                            "local-write",
		RemoteWrite:                           "remote-write",
		RemoteRead:                            "remote-read",
		LocalWrite | RemoteRead:               "local-write|remote-read",
		LocalWrite | RemoteWrite | RemoteRead: "local-write|remote-write|remote-read",
	} {
		if got := a.String(); got != want {
			t.Errorf("Access(%#x).String = %q, want %q", uint8(a), got, want)
		}
	}
}
