//go:build race

package mplite_test

// The race detector's instrumentation allocates, so byte counts of the
// hot paths mean nothing under it.
const raceEnabled = true
