//go:build !race

package mplite_test

const raceEnabled = false
