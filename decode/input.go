package decode

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Why input for the decoders was refused (Dwords).
var (
	ErrTooLarge = errors.New("input too large")
	ErrBadInput = errors.New("bad input")
)

// maxHexLine bounds one line of hex text.
const maxHexLine = 1 << 20

// Dwords reads at most max dwords from r: raw little-endian bytes (a whole number of dwords),
// or with hex set text of hex dwords, any number a line, separated by spaces or commas, "0x"
// optional; a token ending in ':' (an offset, as in this package's listings) and anything
// after '#' or "//" on a line are skipped. More than max dwords is ErrTooLarge; anything else
// that is not a dword is ErrBadInput, naming the line.
func Dwords(r io.Reader, hex bool, max int) ([]uint32, error) {
	if !hex {
		b, err := io.ReadAll(io.LimitReader(r, int64(max)*4+1))
		if err != nil {
			return nil, err
		}
		if len(b) > max*4 {
			return nil, fmt.Errorf("%w: more than %d dwords", ErrTooLarge, max)
		}
		if len(b)%4 != 0 {
			return nil, fmt.Errorf("%w: %d bytes is not a whole number of dwords", ErrBadInput, len(b))
		}
		dws := make([]uint32, len(b)/4)
		for i := range dws {
			dws[i] = binary.LittleEndian.Uint32(b[4*i:])
		}
		return dws, nil
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), maxHexLine)
	var dws []uint32
	for line := 1; sc.Scan(); line++ {
		text := sc.Text()
		if i := strings.IndexByte(text, '#'); i >= 0 {
			text = text[:i]
		}
		if i := strings.Index(text, "//"); i >= 0 {
			text = text[:i]
		}
		for _, tok := range strings.FieldsFunc(text, func(r rune) bool { return r == ' ' || r == '\t' || r == ',' || r == '\r' }) {
			if strings.HasSuffix(tok, ":") {
				continue
			}
			t := strings.TrimPrefix(strings.TrimPrefix(tok, "0x"), "0X")
			v, err := strconv.ParseUint(t, 16, 32)
			if err != nil || t == "" {
				return nil, fmt.Errorf("%w: line %d: %q is not a hex dword", ErrBadInput, line, tok)
			}
			if len(dws) == max {
				return nil, fmt.Errorf("%w: more than %d dwords", ErrTooLarge, max)
			}
			dws = append(dws, uint32(v))
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%w: a line longer than %d bytes", ErrTooLarge, maxHexLine)
		}
		return nil, err
	}
	return dws, nil
}
