package linerate

import (
	"errors"
	"testing"
)

func TestParseFormat(t *testing.T) {
	for _, c := range []struct {
		in   string
		want uint64
	}{{"100mbit", 100e6}, {"1gbit", 1e9}, {"12.5mbps", 100e6}, {"1kibit", 1024}, {"800", 800}, {"0", 0}} {
		got, err := Parse(c.in)
		if err != nil || got != c.want {
			t.Errorf("Parse(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"", "mbit", "-1mbit", "5furlongs", "10%"} {
		if _, err := Parse(bad); !errors.Is(err, ErrRate) {
			t.Errorf("Parse(%q) = %v; want ErrRate", bad, err)
		}
	}
	if got := Format(100e6); got != "100mbit" {
		t.Errorf("Format(100e6) = %q", got)
	}
	if got := Format(1500); got != "1500bit" {
		t.Errorf("Format(1500) = %q", got)
	}
}
