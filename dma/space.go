package dma

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"

	"vgpu/inject"
	"vgpu/ratelog"
)

// MessageTransport reaches guest memory through the client (DMA_READ/DMA_WRITE messages).
// vfiouser.Peer satisfies it. Calls block until the client answers; splitting into messages of
// the negotiated size is the transport's job.
type MessageTransport interface {
	DMARead(iova uint64, p []byte) error
	DMAWrite(iova uint64, p []byte) error
}

// Mapping is one DMA_MAP request, converted by the device layer from vfiouser.DMAMapping.
type Mapping struct {
	IOVA, Size  uint64
	Offset      uint64 // where IOVA lies inside File
	Read, Write bool   // DMA_MAP flags READ/WRITE
	// File backs the mapping; nil means the client sent no fd and the memory is reached through
	// the MessageTransport. Map takes ownership of it.
	File *os.File
}

// Stats is a snapshot of a Space's counters.
type Stats struct {
	Mappings         int    // live mappings
	MessageMappings  int    // of which served through messages (no fd, or fd not mmappable)
	BackingFiles     int    // distinct backing files currently mmapped
	BackingBytes     uint64 // total size of those mmaps
	BytesViaMmap     uint64 // bytes copied through mmap since NewSpace
	BytesViaMessages uint64 // bytes moved through DMA_READ/DMA_WRITE since NewSpace
	Faults           uint64 // accesses that returned a *FaultError
}

// region is one live mapping: [iova, last] (inclusive, so a map may end at 2^64) at offset
// inside back; back nil means message DMA.
type region struct {
	iova, last  uint64
	offset      uint64
	read, write bool
	back        *backing
}

// Space is the device's view of guest memory. See the package documentation for the threading
// and unmap contract.
type Space struct {
	log *slog.Logger
	// rl rate-limits the log lines a client can trigger at will (odd mappings by the
	// thousand).
	rl *ratelog.Limiter

	// mu: the write lock is held to change the table (Map, Unmap, UnmapAll, SetBusMaster,
	// SetTransport); accesses hold the read lock while they copy through mmap, so taking the
	// write lock waits for every such copy in flight.
	mu        sync.RWMutex
	regions   []*region // sorted by iova, non-overlapping
	backings  map[fileKey]*backing
	transport MessageTransport
	busMaster bool

	bytesMmap, bytesMsg, faults atomic.Uint64
	// revocations changes (under the write lock) whenever the device's access to memory is cut
	// off: Bus Master cleared, every mapping dropped, the client changed. A message access
	// (which runs without the lock) checks it before each message, so one that began before a
	// cut-off sends nothing after it.
	revocations atomic.Uint64
	// cut is closed at each revocation (and replaced): a message access waiting for the
	// client's answer gives up at once, so a cut-off never waits on the client.
	cut chan struct{}

	// duringCopy, when set (tests only), runs under the read lock just before an access copies
	// through mmap.
	duringCopy func()

	inj *inject.Set // fault injection (inject.go)
}

// NewSpace returns an empty Space with Bus Master off (the reset state of the COMMAND
// register). A nil log discards.
func NewSpace(log *slog.Logger) *Space {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Space{log: log, rl: ratelog.New(log, 0, 0), backings: make(map[fileKey]*backing), cut: make(chan struct{})}
}

// revokeLocked is a cut-off (write lock held): accesses that began before it send no further
// message, and those waiting for an answer return.
func (s *Space) revokeLocked() {
	s.revocations.Add(1)
	close(s.cut)
	s.cut = make(chan struct{})
}

// SetLimiter makes client-triggered log lines go through l; call it before the Space is used.
func (s *Space) SetLimiter(l *ratelog.Limiter) { s.rl = l }

// lastByte returns the inclusive end of [start, start+size) for size > 0, and false when the
// range runs past 2^64.
func lastByte(start, size uint64) (uint64, bool) {
	if size-1 > math.MaxUint64-start {
		return 0, false
	}
	return start + (size - 1), true
}

// search returns the index of the first region whose last byte is >= addr.
func (s *Space) search(addr uint64) int {
	lo, hi := 0, len(s.regions)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if s.regions[mid].last < addr {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// Map adds a mapping. It takes ownership of m.File on every path. A mapping over existing ones
// replaces the overlapped parts (QEMU aborts the VM when a guest-RAM map fails, so overlap is
// resolved rather than refused); an identical re-map is a no-op. An fd that cannot be mmapped
// degrades to message DMA with a warning. Errors wrap syscall.EINVAL (zero size, range past
// 2^64, Offset+Size beyond the file) or syscall.ENOSPC (ErrTooManyMappings).
func (s *Space) Map(m Mapping) error {
	f := m.File
	fail := func(reason string, errno error) error {
		if f != nil {
			f.Close()
		}
		return fmt.Errorf("dma: map iova %#x size %#x offset %#x: %s: %w", m.IOVA, m.Size, m.Offset, reason, errno)
	}
	if m.Size == 0 {
		return fail("zero size", syscall.EINVAL)
	}
	last, ok := lastByte(m.IOVA, m.Size)
	if !ok {
		return fail("range runs past 2^64", syscall.EINVAL)
	}
	var fi fileInfo
	if f != nil {
		var err error
		fi, err = statFile(f)
		if err != nil {
			s.rl.Warn("dma-fd-unusable", "dma: backing fd unusable, serving the mapping through messages",
				"iova", m.IOVA, "size", m.Size, "err", err)
			f.Close()
			f = nil
		} else if m.Offset > uint64(fi.size) || m.Size > uint64(fi.size)-m.Offset {
			return fail(fmt.Sprintf("offset+size beyond the file's %d bytes", fi.size), syscall.EINVAL)
		}
	}

	s.mu.Lock()
	defer s.mu.Unlock()

	if s.identicalLocked(m, last, f, fi) {
		if f != nil {
			f.Close()
		}
		return nil
	}
	first, end, pieces := s.overlapLocked(m.IOVA, last)
	if len(s.regions)-(end-first)+pieces+1 > MaxMappings {
		return fail("table full", ErrTooManyMappings)
	}
	nr := &region{iova: m.IOVA, last: last, offset: m.Offset, read: m.Read, write: m.Write}
	if f != nil {
		// Acquire before removing the overlapped regions so a re-map of the same file never
		// drops the backing's refcount to zero in between.
		nr.back = s.acquire(fi, f, m.Offset+m.Size, m.Write)
	}
	if n := s.removeLocked(m.IOVA, last); n > 0 {
		s.rl.Info("dma-map-replaced", "dma: map replaced overlapping mappings",
			"iova", m.IOVA, "size", m.Size, "replaced", n)
	}
	s.regions = slices.Insert(s.regions, s.search(m.IOVA), nr)
	return nil
}

// identicalLocked reports whether m exactly matches a live mapping (same range, offset,
// permissions and backing file, or both message-served).
func (s *Space) identicalLocked(m Mapping, last uint64, f *os.File, fi fileInfo) bool {
	i := s.search(m.IOVA)
	if i == len(s.regions) {
		return false
	}
	r := s.regions[i]
	if r.iova != m.IOVA || r.last != last || r.offset != m.Offset || r.read != m.Read || r.write != m.Write {
		return false
	}
	if f == nil {
		return r.back == nil
	}
	return r.back != nil && r.back.key == fi.key
}

// overlapLocked returns the index range [first, end) of regions that intersect [lo, hi] and how
// many pieces of them would survive removing [lo, hi] (0, 1 or 2).
func (s *Space) overlapLocked(lo, hi uint64) (first, end, pieces int) {
	first = s.search(lo)
	end = first
	for end < len(s.regions) && s.regions[end].iova <= hi {
		end++
	}
	if end > first {
		if s.regions[first].iova < lo {
			pieces++
		}
		if s.regions[end-1].last > hi {
			pieces++
		}
	}
	return first, end, pieces
}

// removeLocked removes [lo, hi] from the table, trimming or splitting mappings that straddle
// its edges, and returns how many mappings it removed or cut.
func (s *Space) removeLocked(lo, hi uint64) int {
	first, end, _ := s.overlapLocked(lo, hi)
	if end == first {
		return 0
	}
	var keep []*region
	if r := s.regions[first]; r.iova < lo {
		left := *r
		left.last = lo - 1
		keep = append(keep, &left)
	}
	if r := s.regions[end-1]; r.last > hi {
		right := *r
		right.iova = hi + 1
		right.offset = r.offset + (hi + 1 - r.iova)
		if len(s.regions)-(end-first)+len(keep)+1 > MaxMappings {
			// Splitting one mapping in two would exceed the bound. An unmap must never fail,
			// so give up the right-hand remainder: accesses there fault instead.
			s.rl.Log(slog.LevelError, "dma-table-full", "dma: mapping table full, dropping the remainder of a split mapping",
				"iova", right.iova, "last", right.last)
		} else {
			keep = append(keep, &right)
		}
	}
	// Take the pieces' references before dropping the old regions' ones.
	for _, r := range keep {
		if r.back != nil {
			r.back.refs++
		}
	}
	for _, r := range s.regions[first:end] {
		s.release(r.back)
	}
	s.regions = slices.Replace(s.regions, first, end, keep...)
	return end - first
}

// Unmap removes every mapping inside [iova, iova+size), trimming or splitting those that
// straddle the edges; a size that runs past 2^64 means "to the end", and a range that matches
// nothing is fine (QEMU's vIOMMU unmap storms). It returns how many mappings were removed or
// cut, and only once no access through mmap is in flight.
func (s *Space) Unmap(iova, size uint64) (removed int) {
	if size == 0 {
		return 0
	}
	last, ok := lastByte(iova, size)
	if !ok {
		last = math.MaxUint64
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.removeLocked(iova, last)
}

// UnmapAll drops every mapping (DMA_UNMAP with the ALL flag, or client disconnect) and with
// them every backing mmap and descriptor.
func (s *Space) UnmapAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.regions {
		s.release(r.back)
	}
	s.regions = nil
	s.revokeLocked()
}

// SetTransport sets the client used for message DMA; nil on disconnect.
func (s *Space) SetTransport(t MessageTransport) {
	s.mu.Lock()
	s.transport = t
	s.revokeLocked()
	s.mu.Unlock()
}

// SetBusMaster follows the COMMAND register's Bus Master Enable bit. Turning it off is the
// device's cut-off from guest memory: it waits for accesses through mmap in flight, like Unmap,
// and a message access in flight sends no further message.
func (s *Space) SetBusMaster(on bool) {
	s.mu.Lock()
	s.busMaster = on
	if !on {
		s.revokeLocked()
	}
	s.mu.Unlock()
}

// Epoch returns the count of cut-offs so far. An engine that accepts work on the worker (a
// register write that starts a transfer) records it, and makes its accesses with WriteEpoch:
// a cut-off in between (reset, FLR, disconnect) then refuses them, even if Bus Master has been
// turned on again since.
func (s *Space) Epoch() uint64 { return s.revocations.Load() }

// WriteEpoch is Write that fails with ErrRevoked when a cut-off happened since epoch. The check
// is made under the lock that cut-offs take, so it is exact.
func (s *Space) WriteEpoch(epoch, iova uint64, p []byte) error {
	return s.accessEpoch(iova, p, true, false, epoch, true)
}

// Read copies guest memory at iova into p. Failures are *FaultError.
func (s *Space) Read(iova uint64, p []byte) error { return s.access(iova, p, false, false) }

// Write copies p into guest memory at iova. Failures are *FaultError. A fault in the backing
// memory itself (the client truncated the file) may leave an access spanning several mappings
// partly done; every other failure is detected before any byte moves.
func (s *Space) Write(iova uint64, p []byte) error { return s.access(iova, p, true, false) }

// ReadDirect is Read for callers that must not wait (the L2 under its lock): when any byte is
// served through messages it moves nothing and returns ErrMessageServed (not a fault: the
// caller takes the path that may wait). Other failures are as for Read.
func (s *Space) ReadDirect(iova uint64, p []byte) error { return s.access(iova, p, false, true) }

// WriteDirect is Write for callers that must not wait; see ReadDirect.
func (s *Space) WriteDirect(iova uint64, p []byte) error { return s.access(iova, p, true, true) }

// msgSeg is a piece of an access served through messages: IOVA and the matching slice bounds.
type msgSeg struct {
	iova     uint64
	from, to int
}

func (s *Space) access(iova uint64, p []byte, write, directOnly bool) error {
	return s.accessEpoch(iova, p, write, directOnly, 0, false)
}

func (s *Space) accessEpoch(iova uint64, p []byte, write, directOnly bool, epoch uint64, checkEpoch bool) error {
	if s.inj.Has(inject.DMAFail) && s.inj.DMA(iova, len(p), write) {
		return s.fault(iova, p, write, iova, "failed by an injection rule", ErrInjected)
	}
	if len(p) > MaxAccess {
		return s.fault(iova, p, write, iova, fmt.Sprintf("longer than %d bytes", MaxAccess), ErrTooLarge)
	}
	s.mu.RLock()
	if checkEpoch && s.revocations.Load() != epoch {
		s.mu.RUnlock()
		return s.fault(iova, p, write, iova, "work started before a cut-off (reset, FLR, disconnect)", ErrRevoked)
	}
	if !s.busMaster {
		s.mu.RUnlock()
		return s.fault(iova, p, write, iova, "Bus Master Enable is clear", ErrBusMasterOff)
	}
	if len(p) == 0 {
		s.mu.RUnlock()
		return nil
	}
	last, ok := lastByte(iova, uint64(len(p)))
	if !ok {
		s.mu.RUnlock()
		return s.fault(iova, p, write, iova, "access runs past 2^64", ErrUnmapped)
	}

	// Pass 1: the whole access must be covered, with the right permission, before any byte
	// moves.
	first := s.search(iova)
	i, addr, viaMsg := first, iova, false
	for {
		if i == len(s.regions) || s.regions[i].iova > addr {
			s.mu.RUnlock()
			return s.fault(iova, p, write, addr, "no mapping", ErrUnmapped)
		}
		r := s.regions[i]
		if write && !r.write {
			s.mu.RUnlock()
			return s.fault(iova, p, write, addr, "mapping is not writable", ErrPermission)
		}
		if !write && !r.read {
			s.mu.RUnlock()
			return s.fault(iova, p, write, addr, "mapping is not readable", ErrPermission)
		}
		viaMsg = viaMsg || r.back == nil
		if r.last >= last {
			break
		}
		addr = r.last + 1
		i++
	}

	if viaMsg && directOnly {
		s.mu.RUnlock()
		return ErrMessageServed
	}

	// Pass 2: copy the mmapped pieces under the read lock; note the message pieces.
	var segs []msgSeg
	if s.duringCopy != nil {
		s.duringCopy()
	}
	addr = iova
	for k := first; k <= i; k++ {
		r := s.regions[k]
		end := min(r.last, last)
		from, to := int(addr-iova), int(end-iova)+1
		if r.back == nil {
			if n := len(segs); n > 0 && segs[n-1].to == from {
				segs[n-1].to = to
			} else {
				segs = append(segs, msgSeg{iova: addr, from: from, to: to})
			}
		} else {
			off := r.offset + (addr - r.iova)
			mem := r.back.mem[off : off+uint64(to-from)]
			var err error
			if write {
				err = copyMapped(mem, p[from:to])
			} else {
				err = copyMapped(p[from:to], mem)
			}
			if err != nil {
				s.mu.RUnlock()
				return s.fault(iova, p, write, addr, "backing file shrank under the mapping", ErrUnmapped)
			}
			s.bytesMmap.Add(uint64(to - from))
		}
		addr = end + 1 // wraps only after the last piece
	}
	t := s.transport
	sent, cut := s.revocations.Load(), s.cut // the cut-off count the messages belong to
	s.mu.RUnlock()
	if !viaMsg {
		return nil
	}

	// Message DMA runs without the lock: the client serves DMA_READ/WRITE from its main loop,
	// which may be blocked waiting for our reply to a DMA_UNMAP that needs the write lock.
	if t == nil {
		return s.fault(iova, p, write, segs[0].iova, "mapping has no fd and no client is connected", ErrNoTransport)
	}
	for _, g := range segs {
		if s.revocations.Load() != sent {
			return s.fault(iova, p, write, g.iova, "device cut off from memory while the access was in flight", ErrRevoked)
		}
		if err := s.message(t, cut, g.iova, p[g.from:g.to], write); err != nil {
			if errors.Is(err, ErrRevoked) {
				return s.fault(iova, p, write, g.iova, "device cut off from memory while waiting for the client", err)
			}
			return s.fault(iova, p, write, g.iova, "message DMA failed", err)
		}
		s.bytesMsg.Add(uint64(g.to - g.from))
	}
	return nil
}

// message does one DMA_READ/DMA_WRITE through the client, giving up when cut closes (a
// cut-off): the request then finishes on its own goroutine with private buffers, and its
// answer is dropped, so the caller's p is never touched after this returns. The extra
// goroutine and copy cost little beside the client round trip they accompany.
func (s *Space) message(t MessageTransport, cut chan struct{}, iova uint64, p []byte, write bool) error {
	buf := make([]byte, len(p))
	if write {
		copy(buf, p)
	}
	done := make(chan error, 1)
	go func() {
		if write {
			done <- t.DMAWrite(iova, buf)
		} else {
			done <- t.DMARead(iova, buf)
		}
	}()
	select {
	case err := <-done:
		if err == nil && !write {
			copy(p, buf)
		}
		return err
	case <-cut:
		return ErrRevoked
	}
}

func (s *Space) fault(iova uint64, p []byte, write bool, at uint64, reason string, err error) error {
	s.faults.Add(1)
	fe := &FaultError{IOVA: iova, Len: len(p), Write: write, At: at, Reason: reason, Err: err}
	s.log.Debug("dma: fault", "err", fe)
	return fe
}

// Stats returns a snapshot of the counters.
func (s *Space) Stats() Stats {
	s.mu.RLock()
	defer s.mu.RUnlock()
	st := Stats{
		Mappings:         len(s.regions),
		BackingFiles:     len(s.backings),
		BytesViaMmap:     s.bytesMmap.Load(),
		BytesViaMessages: s.bytesMsg.Load(),
		Faults:           s.faults.Load(),
	}
	for _, r := range s.regions {
		if r.back == nil {
			st.MessageMappings++
		}
	}
	for _, b := range s.backings {
		st.BackingBytes += uint64(len(b.mem))
	}
	return st
}

// Direct copies. CopyOut, CopyIn and CopyWithin move bytes between guest memory and a slice,
// or inside guest memory, with one memory copy per mmapped piece and the read lock held once
// for the whole copy (so an Unmap or a Bus Master change waits for it, as for Read and Write,
// and no caller ever takes the read lock twice). They serve only what is reachable through
// mmap: when Bus Master is off, a byte is unmapped or lacks the permission, a mapping is
// served through messages, or the copy is longer than MaxAccess, they return false having
// moved nothing and counted no fault; the caller then uses Read and Write, which report the
// failure (or do the message DMA). A fault in the backing memory itself (the client truncated
// the file) also returns false, possibly with part of the bytes moved. CopyOut and CopyIn, an
// engine's moves between guest memory and VRAM, stream from 16 KiB (streamCopy: stores that
// bypass the CPU caches, fenced before they return); CopyWithin, whose ranges may overlap,
// uses Go's copy.

// CopyOut copies guest memory at iova into p.
func (s *Space) CopyOut(p []byte, iova uint64) bool {
	return s.copyOne(p, iova, false)
}

// CopyIn copies p into guest memory at iova.
func (s *Space) CopyIn(iova uint64, p []byte) bool {
	return s.copyOne(p, iova, true)
}

// copyOne is CopyOut (write false) and CopyIn. The usual case — [iova, iova+len(p)) inside
// one mmapped mapping — is one lookup and one copy; a range over several mappings takes the
// general path. Both are under one read lock, after the same checks.
func (s *Space) copyOne(p []byte, iova uint64, write bool) bool {
	n := uint64(len(p))
	if n > MaxAccess || s.inj.Has(inject.DMAFail) { // a rule: the checked path decides
		return false
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if !s.busMaster {
		return false
	}
	if n == 0 {
		return true
	}
	if mem, ok := s.withinOneLocked(iova, n, write); ok {
		if s.duringCopy != nil {
			s.duringCopy()
		}
		var err error
		if write {
			err = streamMapped(mem, p)
		} else {
			err = streamMapped(p, mem)
		}
		if err != nil {
			return false
		}
		s.bytesMmap.Add(n)
		return true
	}
	var buf [4][]byte
	pieces, ok := s.piecesLocked(iova, n, write, buf[:0])
	if !ok {
		return false
	}
	if write {
		return s.copyPieces(pieces, [][]byte{p}, streamMapped)
	}
	return s.copyPieces([][]byte{p}, pieces, streamMapped)
}

// withinOneLocked returns the mmapped bytes of [iova, iova+n) (n > 0) when one mapping with
// the permission holds all of them. Called with mu held.
func (s *Space) withinOneLocked(iova, n uint64, write bool) ([]byte, bool) {
	last, ok := lastByte(iova, n)
	if !ok {
		return nil, false
	}
	i := s.search(iova)
	if i == len(s.regions) {
		return nil, false
	}
	r := s.regions[i]
	if r.iova > iova || r.last < last || r.back == nil || write && !r.write || !write && !r.read {
		return nil, false
	}
	off := r.offset + (iova - r.iova)
	return r.back.mem[off : off+n], true
}

// CopyWithin copies n bytes of guest memory from src to dst (overlapping ranges behave like
// Go's copy where they lie in one backing file).
func (s *Space) CopyWithin(dst, src, n uint64) bool {
	var sbuf, dbuf [4][]byte
	return s.direct(n, func() bool {
		sp, ok := s.piecesLocked(src, n, false, sbuf[:0])
		if !ok {
			return false
		}
		dp, ok := s.piecesLocked(dst, n, true, dbuf[:0])
		return ok && s.copyPieces(dp, sp, copyMapped) // Go's copy: the ranges may overlap
	})
}

// direct runs body with the read lock held, after the checks every direct copy shares.
func (s *Space) direct(n uint64, body func() bool) bool {
	if n > MaxAccess || s.inj.Has(inject.DMAFail) { // a rule: the checked path decides
		return false
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if !s.busMaster {
		return false
	}
	if n == 0 {
		return true
	}
	return body()
}

// piecesLocked appends to out the mmapped slices that make up [iova, iova+n) (n > 0), or
// returns false when some byte is unmapped, lacks the permission, or is served through
// messages. Called with mu held.
func (s *Space) piecesLocked(iova, n uint64, write bool, out [][]byte) ([][]byte, bool) {
	last, ok := lastByte(iova, n)
	if !ok {
		return nil, false
	}
	addr := iova
	for i := s.search(iova); ; i++ {
		if i == len(s.regions) || s.regions[i].iova > addr {
			return nil, false
		}
		r := s.regions[i]
		if r.back == nil || write && !r.write || !write && !r.read {
			return nil, false
		}
		end := min(r.last, last)
		off := r.offset + (addr - r.iova)
		out = append(out, r.back.mem[off:off+(end-addr)+1])
		if end == last {
			return out, true
		}
		addr = end + 1
	}
}

// copyPieces copies the concatenation of src into the concatenation of dst (same total
// length), one move (copyMapped or streamMapped) per overlap of a source and a destination
// piece. Called with mu held.
func (s *Space) copyPieces(dst, src [][]byte, move func(dst, src []byte) error) bool {
	if s.duringCopy != nil {
		s.duringCopy()
	}
	var d, sp []byte
	moved := uint64(0)
	for len(dst) > 0 || len(d) > 0 {
		if len(d) == 0 {
			d, dst = dst[0], dst[1:]
			continue
		}
		if len(sp) == 0 {
			sp, src = src[0], src[1:]
			continue
		}
		k := min(len(d), len(sp))
		if move(d[:k], sp[:k]) != nil {
			return false
		}
		d, sp = d[k:], sp[k:]
		moved += uint64(k)
	}
	s.bytesMmap.Add(moved)
	return true
}
