//go:build !race

package bonding

const raceEnabled = false
