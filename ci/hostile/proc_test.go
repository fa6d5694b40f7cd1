package hostile

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// resources is what the server process holds, as /proc and its SIGUSR1 report tell.
type resources struct {
	RSS, Anon, Shmem uint64 // VmRSS, RssAnon, RssShmem in KiB
	FDs, Maps        int    // open descriptors, lines of /proc/PID/maps
	GuestMaps        int    // of which mappings of the client's guest memory memfds
	Goroutines       int    // from the SIGUSR1 report; -1 when it did not come
}

func (r resources) String() string {
	return fmt.Sprintf("RSS %d KiB (anon %d, shmem %d), goroutines %d, fds %d, maps %d (guest memory %d)",
		r.RSS, r.Anon, r.Shmem, r.Goroutines, r.FDs, r.Maps, r.GuestMaps)
}

// procResources reads /proc for pid; the goroutine count is left to the caller.
func procResources(pid int) (resources, error) {
	r := resources{Goroutines: -1}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return r, err
	}
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		name, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		var dst *uint64
		switch name {
		case "VmRSS":
			dst = &r.RSS
		case "RssAnon":
			dst = &r.Anon
		case "RssShmem":
			dst = &r.Shmem
		default:
			continue
		}
		if *dst, err = parseKB(val); err != nil {
			return r, fmt.Errorf("/proc/%d/status %s: %w", pid, name, err)
		}
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return r, err
	}
	r.FDs = len(fds)
	maps, err := os.ReadFile(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return r, err
	}
	r.Maps = bytes.Count(maps, []byte("\n"))
	r.GuestMaps = bytes.Count(maps, []byte("memfd:vfiousertest-guest"))
	return r, nil
}

// parseKB parses a /proc/PID/status size such as "   1234 kB".
func parseKB(s string) (uint64, error) {
	f := strings.Fields(s)
	if len(f) != 2 || f[1] != "kB" {
		return 0, fmt.Errorf("%q is not a size in kB", s)
	}
	return strconv.ParseUint(f[0], 10, 64)
}
