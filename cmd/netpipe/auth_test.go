package main

import (
	"strings"
	"testing"

	"github.com/ethervia/ethervia/nic/auth"
)

// TestSecretChoice: which frames carry tags, and where the secret comes
// from in each mode.
func TestSecretChoice(t *testing.T) {
	mods := modules()
	given := strings.Repeat("ab", auth.SecretLen)
	for _, tc := range []struct {
		name, module, secret, env string
		twoMachine, auth          bool
		wantTags, wantErr         bool
	}{
		{name: "mplite local draws one", module: "mplite", auth: true, wantTags: true},
		{name: "raw never", module: "raw", auth: true},
		{name: "tcp never", module: "tcp", auth: true},
		{name: "off", module: "vi", auth: false},
		{name: "two machines need one", module: "mplite", auth: true, twoMachine: true, wantTags: true, wantErr: true},
		{name: "two machines, -secret", module: "mplite", auth: true, twoMachine: true, secret: given, wantTags: true},
		{name: "two machines, MPLITE_SECRET", module: "rdma", auth: true, twoMachine: true, env: given, wantTags: true},
		{name: "bad -secret", module: "vi", auth: true, secret: "xyz", wantTags: true, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("MPLITE_SECRET", tc.env)
			mod, err := mods.Lookup(tc.module)
			if err != nil {
				t.Fatal(err)
			}
			o := &options{auth: tc.auth, twoMachine: tc.twoMachine, secretHex: tc.secret}
			if got := authenticates(o, mod); got != tc.wantTags {
				t.Fatalf("authenticates = %v, want %v", got, tc.wantTags)
			}
			err = o.setSecret(mod)
			if (err != nil) != tc.wantErr {
				t.Fatalf("setSecret: %v, want an error: %v", err, tc.wantErr)
			}
			if err == nil && tc.wantTags && o.secret == (auth.Secret{}) {
				t.Fatal("no secret set")
			}
			if tc.secret == given && o.secret.Hex() != given {
				t.Fatal("-secret not taken")
			}
		})
	}
}
