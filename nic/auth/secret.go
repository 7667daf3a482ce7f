package auth

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/ethervia/ethervia/nic"
)

// Sizes of the secret and of the trailer every authenticated frame carries.
const (
	SecretLen  = 32
	CounterLen = 8
	TagLen     = 16
	// TrailerLen is what authentication adds to every frame.
	TrailerLen = CounterLen + TagLen
)

// A receive buffer sized by nic.RecvBufLen must hold the trailer.
var _ [nic.TrailerRoom - TrailerLen]struct{}

// Secret is a job's shared secret. Its String method does not print it;
// Hex does.
type Secret [SecretLen]byte

// ErrSecret reports a malformed secret.
var ErrSecret = errors.New("auth: a secret is 64 hexadecimal digits")

// NewSecret draws a secret from the system's random source.
func NewSecret() (Secret, error) {
	var s Secret
	if _, err := rand.Read(s[:]); err != nil {
		return s, fmt.Errorf("auth: new secret: %w", err)
	}
	return s, nil
}

// ParseSecret reads a secret written by Hex.
func ParseSecret(text string) (Secret, error) {
	var s Secret
	b, err := hex.DecodeString(strings.TrimSpace(text))
	if err != nil || len(b) != SecretLen {
		return s, ErrSecret
	}
	copy(s[:], b)
	return s, nil
}

// Hex writes the secret for the environment of a rank.
func (s Secret) Hex() string { return hex.EncodeToString(s[:]) }

// String keeps the secret out of logs and error messages.
func (s Secret) String() string { return "auth.Secret(redacted)" }

// Key is the frame key of one job: immutable, safe for concurrent use.
type Key struct {
	gcm cipher.AEAD
}

// NewKey derives the frame key of the job with the given job key.
func NewKey(s Secret, jobKey uint32) (*Key, error) {
	info := fmt.Sprintf("ethervia frame authentication v1, job %08x", jobKey)
	k, err := hkdf.Key(sha256.New, s[:], nil, info, 32)
	if err != nil {
		return nil, fmt.Errorf("auth: derive key: %w", err)
	}
	blk, err := aes.NewCipher(k)
	if err != nil {
		return nil, fmt.Errorf("auth: key: %w", err)
	}
	gcm, err := cipher.NewGCMWithNonceSize(blk, 16)
	if err != nil {
		return nil, fmt.Errorf("auth: key: %w", err)
	}
	return &Key{gcm: gcm}, nil
}
