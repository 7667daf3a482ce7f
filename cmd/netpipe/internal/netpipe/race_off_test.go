//go:build !race

package netpipe

const raceEnabled = false
