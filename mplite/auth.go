package mplite

import (
	"context"
	"errors"
	"fmt"

	"github.com/ethervia/ethervia/mplite/pmi"
	"github.com/ethervia/ethervia/nic"
	"github.com/ethervia/ethervia/nic/auth"
)

// ErrNoSecret: frame authentication is on and no job secret was given.
var ErrNoSecret = errors.New("no job secret: start the job with mprun or a PMI launcher, " +
	"set MPLITE_SECRET (64 hex digits), or MPLITE_AUTH=0 on a trusted fabric")

// kvsSecretKey names rank 0's secret in the launcher's key-value store.
const kvsSecretKey = "ethervia-secret"

// WithSecret gives the job's shared secret: every frame then carries a tag
// under it (package nic/auth), and frames without a valid one are dropped
// before any layer parses them. Init otherwise reads MPLITE_SECRET, or,
// under a PMI launcher, takes rank 0's fresh secret through the launcher's
// key-value store; NewLocalWorld draws one. NewComm and NewBondedComm
// authenticate their devices only when given a secret.
func WithSecret(s auth.Secret) Option {
	return func(c *config) error {
		c.secret = &s
		return nil
	}
}

// WithAuthentication(false) turns frame authentication off, for a fabric
// where every host is trusted; it overrides MPLITE_AUTH (0 or 1). The
// default is on.
func WithAuthentication(on bool) Option {
	return func(c *config) error {
		c.authOff, c.authSet = !on, true
		return nil
	}
}

// authEnv applies MPLITE_AUTH and MPLITE_SECRET unless options chose.
func (c *config) authEnv(getenv func(string) string) error {
	switch v := getenv("MPLITE_AUTH"); {
	case c.authSet || v == "":
	case v == "0":
		c.authOff = true
	case v == "1":
		c.authOff = false
	default:
		return fmt.Errorf("mplite: MPLITE_AUTH=%q: want 0 or 1", v)
	}
	if v := getenv("MPLITE_SECRET"); c.secret == nil && v != "" {
		s, err := auth.ParseSecret(v)
		if err != nil {
			return fmt.Errorf("mplite: MPLITE_SECRET: %w", err)
		}
		c.secret = &s
	}
	return nil
}

// authenticate puts every device behind the job's frame authentication,
// in place. It does nothing when authentication is off or no secret is
// known.
func (c *config) authenticate(devs []nic.Device) error {
	if c.authOff || c.secret == nil {
		return nil
	}
	if c.authKey == nil {
		key, err := auth.NewKey(*c.secret, c.jobKey)
		if err != nil {
			return err
		}
		c.authKey = key
	}
	for i, d := range devs {
		if auth.Overhead(d) > 0 {
			continue // already behind it
		}
		w, err := auth.Wrap(d, c.authKey, auth.Config{})
		if err != nil {
			return fmt.Errorf("rail %d: %w", i, err)
		}
		devs[i] = w
	}
	return nil
}

// kvsSecret makes sure the job has a secret under a PMI launcher: rank 0
// draws one and publishes it, to be read after the next fence (the
// address exchange's) by kvsSecretRead.
func kvsSecretPublish(ctx context.Context, l *pmi.Client, rank int) error {
	if rank != 0 {
		return nil
	}
	s, err := auth.NewSecret()
	if err != nil {
		return err
	}
	if err := l.Put(ctx, kvsSecretKey, s.Hex()); err != nil {
		return fmt.Errorf("publish the job secret: %w", err)
	}
	return nil
}

// kvsSecretRead reads rank 0's secret after the fence.
func kvsSecretRead(ctx context.Context, l *pmi.Client) (*auth.Secret, error) {
	v, err := l.Get(ctx, kvsSecretKey)
	if err != nil {
		return nil, fmt.Errorf("the job secret: %w", err)
	}
	s, err := auth.ParseSecret(v)
	if err != nil {
		return nil, fmt.Errorf("rank 0's job secret: %w", err)
	}
	return &s, nil
}

// AuthStats counts the frames this rank's devices refused: without a
// valid tag (a host without the job's secret, or damage), and replays of
// frames already taken.
type AuthStats struct {
	On               bool
	BadTag, Replayed uint64
}

// AuthStats returns the authentication counters of the rank's devices.
func (c *Comm) AuthStats() AuthStats {
	var s AuthStats
	for _, d := range c.world.devs {
		if auth.Overhead(d) == 0 {
			continue
		}
		s.On = true
		ds := d.Stats()
		s.BadTag += ds.RxBadTag
		s.Replayed += ds.RxReplayed
	}
	return s
}
