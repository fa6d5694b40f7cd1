//go:build !race

package ci

// raceGuestArgs: the guest module's defaults (see race_on_test.go).
const raceGuestArgs = ""
