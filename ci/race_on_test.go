//go:build race

package ci

// raceGuestArgs: under the race detector the device runs several times slower, so the
// guest's waits get more time (what they check does not change, only how long they wait).
const raceGuestArgs = "timeout_ms=10000 job_timeout_ms=3000"
