package pmi

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Limits of the wire. Hydra's keys are at most 64 bytes and its values
// 1024; MPICH's PMI-2 commands at most 64 KiB.
const (
	MaxKeyLen   = 64
	MaxValueLen = 1024
	maxV1Line   = 4096
	maxV2Len    = 64 << 10
	v2LenDigits = 6
)

// Errors.
var (
	// ErrProtocol reports a message that breaks the wire protocol.
	ErrProtocol = errors.New("pmi: protocol error")
	// ErrNotFound reports a key the store does not hold.
	ErrNotFound = errors.New("pmi: key not found")
	// ErrFailed reports a request the other end answered with a non-zero rc.
	ErrFailed = errors.New("pmi: request failed")
	// ErrEnvironment reports launcher variables that are missing or wrong.
	ErrEnvironment = errors.New("pmi: bad launcher environment")
)

// pair is one key=value of a message.
type pair struct{ key, val string }

// message is one request or response: its command and its other pairs.
type message struct {
	cmd   string
	pairs []pair
}

// get returns the value of key and whether the message has it.
func (m message) get(key string) (string, bool) {
	for _, p := range m.pairs {
		if p.key == key {
			return p.val, true
		}
	}
	return "", false
}

// getInt returns key's value as an integer.
func (m message) getInt(key string) (int, error) {
	s, ok := m.get(key)
	if !ok {
		return 0, fmt.Errorf("%w: %s has no %s", ErrProtocol, m.cmd, key)
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, fmt.Errorf("%w: %s: %s=%q", ErrProtocol, m.cmd, key, s)
	}
	return n, nil
}

// rc returns ErrFailed, with the message's text, if it carries a non-zero
// rc. A missing rc means success (PMI-1 allows it to be left out).
func (m message) rc() error {
	s, ok := m.get("rc")
	if !ok || s == "0" {
		return nil
	}
	text, _ := m.get("msg")
	if text == "" {
		text, _ = m.get("errmsg")
	}
	return fmt.Errorf("%w: %s rc=%s %s", ErrFailed, m.cmd, s, text)
}

// msg builds a message from a command and alternating keys and values.
func msg(cmd string, kv ...string) message {
	m := message{cmd: cmd}
	for i := 0; i+1 < len(kv); i += 2 {
		m.pairs = append(m.pairs, pair{kv[i], kv[i+1]})
	}
	return m
}

// validWord reports whether s can travel as a PMI-1 key or value: visible
// ASCII without '=' or spaces, as the simple protocol requires.
func validWord(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c > '~' || c == '=' {
			return false
		}
	}
	return true
}

// appendV1 encodes m as a PMI-1 line.
func appendV1(b []byte, m message) ([]byte, error) {
	if !validWord(m.cmd) {
		return b, fmt.Errorf("%w: command %q", ErrProtocol, m.cmd)
	}
	b = append(b, "cmd="...)
	b = append(b, m.cmd...)
	for _, p := range m.pairs {
		if p.key == "" || !validWord(p.key) || !validWord(p.val) {
			return b, fmt.Errorf("%w: %s=%q cannot travel in PMI-1", ErrProtocol, p.key, p.val)
		}
		b = append(b, ' ')
		b = append(b, p.key...)
		b = append(b, '=')
		b = append(b, p.val...)
	}
	return append(b, '\n'), nil
}

// parseV1 decodes one PMI-1 line (without its newline). The first pair must
// be cmd=; pairs may be separated by any run of spaces or tabs.
func parseV1(line string) (message, error) {
	var m message
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return m, fmt.Errorf("%w: empty line", ErrProtocol)
	}
	for i, f := range fields {
		k, v, ok := strings.Cut(f, "=")
		if !ok || k == "" {
			return m, fmt.Errorf("%w: %q is not key=value", ErrProtocol, f)
		}
		if i == 0 {
			if k != "cmd" && k != "mcmd" {
				return m, fmt.Errorf("%w: line starts with %q, not cmd=", ErrProtocol, k)
			}
			m.cmd = v
			continue
		}
		m.pairs = append(m.pairs, pair{k, v})
	}
	return m, nil
}

// readV1 reads one PMI-1 line.
func readV1(r *bufio.Reader) (message, error) {
	line, err := r.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) || len(line) > maxV1Line {
		return message{}, fmt.Errorf("%w: line longer than %d bytes", ErrProtocol, maxV1Line)
	}
	if err != nil {
		if errors.Is(err, io.EOF) && len(line) > 0 {
			err = io.ErrUnexpectedEOF
		}
		return message{}, err
	}
	return parseV1(strings.TrimRight(string(line), "\r\n"))
}

// appendV2 encodes m as a PMI-2 command with its length field.
func appendV2(b []byte, m message) ([]byte, error) {
	start := len(b)
	b = append(b, "      "...) // the length, filled in below
	b = appendV2Pair(b, "cmd", m.cmd)
	for _, p := range m.pairs {
		if p.key == "" || strings.ContainsAny(p.key, "=;") {
			return b[:start], fmt.Errorf("%w: key %q", ErrProtocol, p.key)
		}
		b = appendV2Pair(b, p.key, p.val)
	}
	n := len(b) - start - v2LenDigits
	if n > maxV2Len {
		return b[:start], fmt.Errorf("%w: command of %d bytes", ErrProtocol, n)
	}
	copy(b[start:], strconv.Itoa(n))
	return b, nil
}

func appendV2Pair(b []byte, k, v string) []byte {
	b = append(b, k...)
	b = append(b, '=')
	for i := 0; i < len(v); i++ {
		if v[i] == ';' {
			b = append(b, ';')
		}
		b = append(b, v[i])
	}
	return append(b, ';')
}

// parseV2 decodes the body of a PMI-2 command (after its length field).
func parseV2(body string) (message, error) {
	var m message
	for first := true; body != ""; first = false {
		k, rest, ok := strings.Cut(body, "=")
		if !ok || k == "" || strings.Contains(k, ";") {
			return m, fmt.Errorf("%w: %q is not key=value;", ErrProtocol, body)
		}
		var v strings.Builder
		i := 0
		for ; i < len(rest); i++ {
			if rest[i] == ';' {
				if i+1 < len(rest) && rest[i+1] == ';' {
					v.WriteByte(';')
					i++
					continue
				}
				break
			}
			v.WriteByte(rest[i])
		}
		if i == len(rest) {
			return m, fmt.Errorf("%w: value of %q has no terminating ';'", ErrProtocol, k)
		}
		body = rest[i+1:]
		if first {
			if k != "cmd" {
				return m, fmt.Errorf("%w: command starts with %q, not cmd=", ErrProtocol, k)
			}
			m.cmd = v.String()
			continue
		}
		m.pairs = append(m.pairs, pair{k, v.String()})
	}
	if m.cmd == "" {
		return m, fmt.Errorf("%w: empty command", ErrProtocol)
	}
	return m, nil
}

// readV2 reads one PMI-2 command.
func readV2(r *bufio.Reader) (message, error) {
	var hdr [v2LenDigits]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return message{}, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(hdr[:])))
	if err != nil || n < 0 || n > maxV2Len {
		return message{}, fmt.Errorf("%w: length field %q", ErrProtocol, hdr[:])
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return message{}, err
	}
	return parseV2(string(body))
}

// appendMsg encodes m in the given protocol version's wire form.
func appendMsg(b []byte, version int, m message) ([]byte, error) {
	if version == 2 {
		return appendV2(b, m)
	}
	return appendV1(b, m)
}

// readMsg reads one message in the given protocol version's wire form.
func readMsg(r *bufio.Reader, version int) (message, error) {
	if version == 2 {
		return readV2(r)
	}
	return readV1(r)
}
