//go:build !race

package dma

const raceEnabled = false
