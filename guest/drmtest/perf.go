package main

import (
	"fmt"
	"slices"
	"time"
)

// latencyStats are the median and p99 of a sample of durations.
type latencyStats struct{ median, p99 time.Duration }

func stats(d []time.Duration) latencyStats {
	s := slices.Clone(d)
	slices.Sort(s)
	if len(s) == 0 {
		return latencyStats{}
	}
	return latencyStats{median: s[len(s)/2], p99: s[min(len(s)-1, len(s)*99/100)]}
}

// median of a few figures.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// verdict says whether the figure meets its target, for the summary.
func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "not met"
}

// ratioLine is the summary line of the user queue against the kernel queue.
func ratioLine(uJobs, kJobs float64, uLat, kLat time.Duration) (jobsRatio, latRatio float64, line string) {
	jobsRatio = uJobs / kJobs
	latRatio = float64(uLat) / float64(kLat)
	line = fmt.Sprintf("userq vs kq: %.2fx the jobs/s (target >= 2x: %s), %.2fx the median latency (target <= 0.5x: %s)",
		jobsRatio, verdict(jobsRatio >= 2), latRatio, verdict(latRatio <= 0.5))
	return
}
