package mplite

import (
	"errors"
	"testing"
	"time"
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

func TestPollEnvironment(t *testing.T) {
	env := func(kv map[string]string) func(string) string {
		return func(k string) string { return kv[k] }
	}
	c := defaultConfig()
	if err := c.pollEnv(env(map[string]string{"MPLITE_SPIN": "5us", "MPLITE_YIELD": "1"})); err != nil {
		t.Fatal(err)
	}
	if c.spin != 5*time.Microsecond || !c.yield || !c.osYield {
		t.Fatalf("MPLITE_SPIN=5us MPLITE_YIELD=1: spin %v yield %v osYield %v", c.spin, c.yield, c.osYield)
	}
	if c.grace() != sharedGrace {
		t.Fatalf("MPLITE_YIELD=1: grace %v", c.grace())
	}
	c = defaultConfig()
	if err := c.pollEnv(env(nil)); err != nil || c.spin != DefaultSpinTime || c.yield || c.osYield || c.grace() != bgGrace {
		t.Fatalf("unset: spin %v yield %v osYield %v grace %v err %v", c.spin, c.yield, c.osYield, c.grace(), err)
	}
	// Yielding ranks spin longer unless a spin time was chosen.
	c = defaultConfig()
	if err := c.pollEnv(env(map[string]string{"MPLITE_YIELD": "1"})); err != nil || c.spin != YieldSpinTime {
		t.Fatalf("MPLITE_YIELD=1 alone: spin %v err %v", c.spin, err)
	}
	c = defaultConfig()
	for _, o := range []Option{WithProcessYield(true), WithSpinTime(7 * time.Microsecond)} {
		if err := o(&c); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.pollEnv(env(nil)); err != nil || c.spin != 7*time.Microsecond {
		t.Fatalf("WithProcessYield and WithSpinTime: spin %v err %v", c.spin, err)
	}
	c = defaultConfig()
	if err := c.pollEnv(env(map[string]string{"MPLITE_CPUS": "2"})); err != nil || c.sharedCPUs != 2 {
		t.Fatalf("MPLITE_CPUS=2: %d, %v", c.sharedCPUs, err)
	}
	for _, bad := range []map[string]string{{"MPLITE_SPIN": "5"}, {"MPLITE_YIELD": "yes"}, {"MPLITE_CPUS": "0"}} {
		c = defaultConfig()
		if err := c.pollEnv(env(bad)); !errors.Is(err, ErrEnvironment) {
			t.Errorf("%v: err %v, want ErrEnvironment", bad, err)
		}
	}
	// Options beat the environment.
	c = defaultConfig()
	for _, o := range []Option{WithSpinTime(time.Millisecond), WithYield(false)} {
		if err := o(&c); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.pollEnv(env(map[string]string{"MPLITE_SPIN": "-1ns", "MPLITE_YIELD": "1"})); err != nil {
		t.Fatal(err)
	}
	if c.spin != time.Millisecond || c.yield || c.osYield {
		t.Fatalf("options then environment: spin %v yield %v osYield %v", c.spin, c.yield, c.osYield)
	}
}
