package mplite

import (
	"errors"
	"testing"
)

func TestEagerLimitEnvironment(t *testing.T) {
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == "MPLITE_EAGER_LIMIT" {
				return v
			}
			return ""
		}
	}
	c := defaultConfig()
	if err := c.eagerEnv(env("65536")); err != nil || c.eagerLimit != 65536 {
		t.Fatalf("MPLITE_EAGER_LIMIT=65536: limit %d, err %v", c.eagerLimit, err)
	}
	c = defaultConfig()
	if err := c.eagerEnv(env("")); err != nil || c.eagerLimit != DefaultEagerLimit {
		t.Fatalf("unset: limit %d, err %v", c.eagerLimit, err)
	}
	for _, bad := range []string{"-1", "12k", "99999999999"} {
		c = defaultConfig()
		if err := c.eagerEnv(env(bad)); !errors.Is(err, ErrEnvironment) {
			t.Errorf("MPLITE_EAGER_LIMIT=%q: err %v, want ErrEnvironment", bad, err)
		}
	}
	c = defaultConfig()
	if err := WithEagerLimit(100)(&c); err != nil {
		t.Fatal(err)
	}
	if err := c.eagerEnv(env("65536")); err != nil || c.eagerLimit != 100 {
		t.Fatalf("an option beats the environment: limit %d, err %v", c.eagerLimit, err)
	}
}
