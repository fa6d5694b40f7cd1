package boot

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// KernelLog turns what /init forwarded from /dev/kmsg into dmesg's lines: "[    1.234567]
// message". A record is "prio,seq,usec,flags[,...];message" followed by " KEY=value" lines
// (device properties, left out); non-printable bytes arrive as \xNN and are decoded. Lines
// that are not records (a torn first read) are kept as they are.
func KernelLog(raw []byte) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, " ") {
			continue // a record's dictionary
		}
		head, msg, ok := strings.Cut(line, ";")
		f := strings.Split(head, ",")
		if !ok || len(f) < 4 {
			if line != "" {
				out = append(out, line)
			}
			continue
		}
		usec, err := strconv.ParseUint(f[2], 10, 64)
		if err != nil {
			out = append(out, line)
			continue
		}
		for _, m := range strings.Split(unescapeKmsg(msg), "\n") {
			out = append(out, fmt.Sprintf("[%5d.%06d] %s", usec/1e6, usec%1e6, m))
		}
	}
	return out
}

var kmsgEscapeRE = regexp.MustCompile(`\\x[0-9a-f]{2}`)

func unescapeKmsg(s string) string {
	if !strings.Contains(s, `\x`) {
		return s
	}
	return kmsgEscapeRE.ReplaceAllStringFunc(s, func(e string) string {
		b, _ := strconv.ParseUint(e[2:], 16, 8)
		if b == '\n' || b == '\t' || b == '\\' || (b >= 0x20 && b < 0x7f) {
			return string(rune(b))
		}
		return e
	})
}

// stripTimestamp removes a leading printk timestamp ("[    1.234567] ").
func stripTimestamp(line string) string {
	return timestampRE.ReplaceAllString(line, "")
}

var timestampRE = regexp.MustCompile(`^\[\s*\d+\.\d+\] ?`)

// consoleLines splits the serial console log into lines without carriage returns.
func consoleLines(b []byte) []string {
	s := strings.ReplaceAll(string(b), "\r", "")
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// lastLines returns the last n non-empty lines.
func lastLines(lines []string, n int) []string {
	var out []string
	for i := len(lines) - 1; i >= 0 && len(out) < n; i-- {
		if strings.TrimSpace(lines[i]) != "" {
			out = append(out, lines[i])
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}
