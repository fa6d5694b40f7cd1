//go:build race

package dma

// raceEnabled: under the race detector every copy is Go's copy, which the detector sees (it
// does not see the streaming loop's assembly).
const raceEnabled = true
