// Package vfiousertest is a vfio-user client written in Go that does what QEMU does, so a
// vfiouser.Device can be tested without QEMU: negotiation, region info with sparse mmap and fd,
// trapped and posted region access, WRITE_MULTI, SET_IRQS with eventfds, DMA maps of memfd
// "guest memory" (with or without fd) and service of the server's DMA_READ/DMA_WRITE requests.
// It also sends raw, malformed messages for conformance tests.
//
// Reading: a caller waiting for a reply reads the socket itself when nobody else does, serving
// whatever else arrives meanwhile (the server's DMA requests, other callers' replies), so a
// round trip costs no goroutine hand-off. A background reader takes over for good as soon as
// something must be read while no call is in flight: the first DMAMap (the server may then DMA
// at any time), Done, Err, Recv, WithoutDMAService or WithBackgroundReader.
package vfiousertest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"vgpu/vfiouser"
)

// QEMUVersionJSON is the capabilities text QEMU 11.1 sends in its VERSION request.
const QEMUVersionJSON = `{"capabilities": {"pgsizes": 4096, "max_msg_fds": 16, "max_dma_maps": 65535, "max_data_xfer_size": 1048576, "migration": {"max_bitmap_size": 268435456, "pgsize": 4096}, "write_multiple": true}}`

// DefaultTimeout bounds every wait of the client (QEMU's x-msg-timeout).
const DefaultTimeout = 5 * time.Second

// unsolicitedDepth bounds the queue Recv reads; beyond it messages are dropped and counted.
const unsolicitedDepth = 256

// ErrClosed is returned once the connection is gone.
var ErrClosed = errors.New("vfiousertest: connection closed")

// ErrTimeout is returned when the server did not answer in time.
var ErrTimeout = errors.New("vfiousertest: timed out")

// Option configures a Client.
type Option func(*Client)

// WithTimeout sets how long calls wait for replies.
func WithTimeout(d time.Duration) Option { return func(c *Client) { c.timeout = d } }

// WithoutDMAService makes the client queue the server's DMA requests for Recv instead of
// answering them, so tests can answer (or not) by hand.
func WithoutDMAService() Option {
	return func(c *Client) { c.serveDMA, c.bgAtStart = false, true }
}

// WithBackgroundReader starts the background reader at once, so the server's requests are
// served even before the first DMAMap.
func WithBackgroundReader() Option { return func(c *Client) { c.bgAtStart = true } }

// Client is a vfio-user client. Its methods may be called from several goroutines. Whoever
// reads (a waiting caller, or the background reader once started) matches replies to calls and
// serves the server's DMA requests, like QEMU's iothread.
type Client struct {
	conn      *vfiouser.Conn
	timeout   time.Duration
	serveDMA  bool
	bgAtStart bool

	// role is the right to read the socket: a one-slot semaphore, so a caller can wait for
	// either its reply or the right to read it itself.
	role         chan struct{}
	bgOnce       sync.Once
	readDeadline time.Time // guarded by role

	mu       sync.Mutex
	nextID   uint16
	pending  map[uint16]*call
	eventfds []int

	unsolicited chan *vfiouser.Message
	dropped     atomic.Uint64

	mapsMu sync.RWMutex
	maps   []dmaMap

	dmaReads, dmaWrites atomic.Uint64

	// From negotiation.
	serverCaps vfiouser.Capabilities
	ourMaxXfer uint64 // what we advertised: the limit for the server's DMA requests

	done      chan struct{}
	readErr   error
	failOnce  sync.Once
	closeOnce sync.Once
	serverErr chan error // set by NewPair
	msgPool   sync.Pool
	callPool  sync.Pool
}

// call is one outstanding request; ch is buffered so the reader never blocks.
type call struct {
	cmd vfiouser.Command
	ch  chan *vfiouser.Message
}

// Dial connects to a server listening on a unix socket path.
func Dial(path string) (*Client, error) {
	uc, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	return NewClient(uc)
}

// NewClient starts a client on a connected socket; the client owns uc.
func NewClient(uc *net.UnixConn, opts ...Option) (*Client, error) {
	// Blocking, like the server and like QEMU, which shares no scheduler with the server: a
	// client on the runtime's poller in the server's own process lets one thread run client,
	// reader and engine with no OS wake-up, which no real client gets.
	conn, err := vfiouser.NewBlockingConn(uc)
	if err != nil {
		uc.Close()
		return nil, err
	}
	c := &Client{
		conn:        conn,
		timeout:     DefaultTimeout,
		serveDMA:    true,
		pending:     make(map[uint16]*call),
		unsolicited: make(chan *vfiouser.Message, unsolicitedDepth),
		ourMaxXfer:  vfiouser.MaxDataXferSize,
		role:        make(chan struct{}, 1),
		done:        make(chan struct{}),
	}
	c.msgPool.New = func() any { return new(vfiouser.Message) }
	c.callPool.New = func() any { return &call{ch: make(chan *vfiouser.Message, 1)} }
	for _, o := range opts {
		o(c)
	}
	if c.bgAtStart {
		c.ensureBackground()
	}
	return c, nil
}

// Done is closed when the connection is gone (server closed it, or Close). It starts the
// background reader, since only reading notices the server hanging up.
func (c *Client) Done() <-chan struct{} {
	c.ensureBackground()
	return c.done
}

// Err is the error that ended the connection, once it ended (io.EOF when the server closed it).
func (c *Client) Err() error {
	<-c.Done()
	return c.readErr
}

// Close closes the connection, waits for whoever reads and closes every eventfd the client made.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.conn.Close()
		c.fail(ErrClosed)
		c.role <- struct{}{} // wait until no goroutine reads any more
		<-c.role
		c.mu.Lock()
		closeAll(c.eventfds)
		c.eventfds = nil
		c.mu.Unlock()
		c.drainUnsolicited()
	})
	return nil
}

// drainUnsolicited closes the fds of every message nobody picked up with Recv.
func (c *Client) drainUnsolicited() {
	for {
		select {
		case m := <-c.unsolicited:
			m.CloseFDs()
		default:
			return
		}
	}
}

func closeAll(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

// DMAStats reports how many DMA_READ and DMA_WRITE requests of the server the client served.
func (c *Client) DMAStats() (reads, writes uint64) { return c.dmaReads.Load(), c.dmaWrites.Load() }

// Dropped counts unsolicited messages lost because nobody called Recv.
func (c *Client) Dropped() uint64 { return c.dropped.Load() }

// ServerCaps is what the server advertised in VERSION.
func (c *Client) ServerCaps() vfiouser.Capabilities { return c.serverCaps }

// ensureBackground starts the background reader once; it then holds the read role for good.
func (c *Client) ensureBackground() {
	c.bgOnce.Do(func() { go c.background() })
}

func (c *Client) background() {
	c.role <- struct{}{}
	defer func() { <-c.role }()
	c.conn.SetReadDeadline(time.Time{}) // idle waits are normal from now on
	for {
		m := c.msgPool.Get().(*vfiouser.Message)
		if err := c.conn.ReadMessage(m); err != nil {
			c.fail(err)
			return
		}
		c.dispatch(m)
	}
}

// armDeadline bounds a caller's blocking read to between timeout/2 and timeout from now.
// Re-arming only when less than half the timeout is left keeps the poller's timer out of
// nearly every round trip. Only read-role holders touch readDeadline; the background reader
// clears the deadline when it takes the role for good.
func (c *Client) armDeadline() {
	now := time.Now()
	if c.readDeadline.Sub(now) > c.timeout/2 {
		return
	}
	c.readDeadline = now.Add(c.timeout)
	c.conn.SetReadDeadline(c.readDeadline)
}

// fail ends the connection once, recording why.
func (c *Client) fail(err error) {
	c.failOnce.Do(func() {
		c.readErr = err
		c.conn.Close()
		close(c.done)
	})
}

// dispatch routes one received message: replies to their callers, requests to the DMA service.
func (c *Client) dispatch(m *vfiouser.Message) {
	switch {
	case m.IsReply():
		c.deliver(m)
	case c.serveDMA:
		c.serveRequest(m)
		c.releaseMsg(m)
	default:
		c.queueUnsolicited(m)
	}
}

// readFor reads with the read role held until cl's reply has been delivered. A timeout ends
// the connection: the read may have stopped inside a message.
func (c *Client) readFor(cl *call) (*vfiouser.Message, error) {
	c.armDeadline()
	for {
		select {
		case m := <-cl.ch:
			return m, nil
		default:
		}
		m := c.msgPool.Get().(*vfiouser.Message)
		if err := c.conn.ReadMessage(m); err != nil {
			c.fail(err)
			if errors.Is(err, os.ErrDeadlineExceeded) {
				return nil, ErrTimeout
			}
			return nil, ErrClosed
		}
		c.dispatch(m)
	}
}

// deliver hands a reply to its caller, or to Recv when no call waits for that id.
func (c *Client) deliver(m *vfiouser.Message) {
	c.mu.Lock()
	cl := c.pending[m.ID]
	if cl != nil && cl.cmd == m.Cmd {
		delete(c.pending, m.ID)
	} else {
		cl = nil
	}
	c.mu.Unlock()
	if cl != nil {
		cl.ch <- m
		return
	}
	c.queueUnsolicited(m)
}

func (c *Client) queueUnsolicited(m *vfiouser.Message) {
	select {
	case c.unsolicited <- m:
	default:
		m.CloseFDs()
		c.dropped.Add(1)
	}
}

func (c *Client) releaseMsg(m *vfiouser.Message) {
	m.CloseFDs()
	if cap(m.Payload) > 64<<10 {
		m.Payload = nil
	}
	c.msgPool.Put(m)
}

// allocID returns an id no pending call uses; with cl it also registers the call.
func (c *Client) allocID(cl *call) uint16 {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		c.nextID++
		if _, busy := c.pending[c.nextID]; !busy {
			break
		}
	}
	if cl != nil {
		c.pending[c.nextID] = cl
	}
	return c.nextID
}

// NextID returns a message id for a raw Send that no outstanding call uses.
func (c *Client) NextID() uint16 { return c.allocID(nil) }

// ReplyError is the error of an error reply.
type ReplyError struct {
	Cmd   vfiouser.Command
	Errno unix.Errno
}

func (e *ReplyError) Error() string { return fmt.Sprintf("%v: error reply: %v", e.Cmd, e.Errno) }
func (e *ReplyError) Unwrap() error { return e.Errno }

// Call sends a command made of parts and waits for its reply. An error reply becomes a
// *ReplyError (errors.Is(err, unix.EINVAL) works); the reply is returned as well. The caller
// owns the reply's fds. fds stay owned by the caller.
func (c *Client) Call(cmd vfiouser.Command, fds []int, parts ...[]byte) (*vfiouser.Message, error) {
	cl := c.callPool.Get().(*call)
	cl.cmd = cmd
	id := c.allocID(cl)
	if err := c.conn.WriteMessage(vfiouser.Header{ID: id, Cmd: cmd}, fds, parts...); err != nil {
		c.abandon(id, cl)
		return nil, fmt.Errorf("%v: %w (%v)", cmd, ErrClosed, err)
	}
	// Fast path: nobody reads, so read the reply ourselves (no hand-off between goroutines).
	select {
	case c.role <- struct{}{}:
		m, err := c.readFor(cl)
		<-c.role
		if err != nil {
			c.abandon(id, cl)
			return nil, fmt.Errorf("%v: %w", cmd, err)
		}
		return c.finishCall(cmd, cl, m)
	default:
	}
	t := time.NewTimer(c.timeout)
	defer t.Stop()
	for {
		select {
		case m := <-cl.ch:
			return c.finishCall(cmd, cl, m)
		case c.role <- struct{}{}: // the reader before us left: read for ourselves
			m, err := c.readFor(cl)
			<-c.role
			if err != nil {
				c.abandon(id, cl)
				return nil, fmt.Errorf("%v: %w", cmd, err)
			}
			return c.finishCall(cmd, cl, m)
		case <-c.done:
			c.abandon(id, cl)
			return nil, fmt.Errorf("%v: %w", cmd, ErrClosed)
		case <-t.C:
			c.abandon(id, cl)
			return nil, fmt.Errorf("%v: %w", cmd, ErrTimeout)
		}
	}
}

func (c *Client) finishCall(cmd vfiouser.Command, cl *call, m *vfiouser.Message) (*vfiouser.Message, error) {
	c.callPool.Put(cl)
	if m.IsError() {
		return m, &ReplyError{Cmd: cmd, Errno: unix.Errno(m.Error)}
	}
	return m, nil
}

// abandon forgets a call; its channel is not reused since a late reply may still land in it.
func (c *Client) abandon(id uint16, cl *call) {
	c.mu.Lock()
	if c.pending[id] == cl {
		delete(c.pending, id)
	}
	c.mu.Unlock()
}

// Post sends a command with NO_REPLY and does not wait. An error reply, if any, shows up in Recv.
func (c *Client) Post(cmd vfiouser.Command, fds []int, parts ...[]byte) error {
	id := c.allocID(nil)
	return c.conn.WriteMessage(vfiouser.Header{ID: id, Cmd: cmd, Flags: vfiouser.FlagNoReply}, fds, parts...)
}

// Send writes one message with h exactly as given, except that a zero Size is filled in. It
// does not wait; use Recv for the answer.
func (c *Client) Send(h vfiouser.Header, payload []byte, fds []int) error {
	if h.Size == 0 {
		h.Size = uint32(vfiouser.HeaderSize + len(payload))
	}
	return c.conn.WriteRaw(append(h.Append(nil), payload...), fds)
}

// SendRaw writes arbitrary bytes (and fds) to the socket.
func (c *Client) SendRaw(b []byte, fds []int) error { return c.conn.WriteRaw(b, fds) }

// Recv returns the next message no call was waiting for: replies to Send/Post, and the
// server's requests under WithoutDMAService. The caller owns its fds.
func (c *Client) Recv(timeout time.Duration) (*vfiouser.Message, error) {
	c.ensureBackground()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case m := <-c.unsolicited:
		return m, nil
	case <-t.C:
		return nil, ErrTimeout
	case <-c.done:
		select {
		case m := <-c.unsolicited:
			return m, nil
		default:
			return nil, ErrClosed
		}
	}
}

// Reply answers a server request received with Recv (for WithoutDMAService tests). errno 0
// sends a normal reply with payload.
func (c *Client) Reply(req *vfiouser.Message, errno unix.Errno, payload []byte) error {
	h := vfiouser.Header{ID: req.ID, Cmd: req.Cmd, Flags: vfiouser.FlagTypeReply}
	if errno != 0 {
		h.Flags |= vfiouser.FlagError
		h.Error = uint32(errno)
		payload = nil
	}
	return c.conn.WriteMessage(h, nil, payload)
}

// Negotiate sends QEMU's VERSION request and records the server's capabilities.
func (c *Client) Negotiate() (vfiouser.Capabilities, error) {
	return c.NegotiateWith(vfiouser.VersionMsg{JSON: []byte(QEMUVersionJSON)})
}

// NegotiateWith sends a VERSION request of the caller's making (for example a smaller
// max_data_xfer_size) and records the server's capabilities.
func (c *Client) NegotiateWith(v vfiouser.VersionMsg) (vfiouser.Capabilities, error) {
	ours, err := vfiouser.ParseCapabilities(v.JSON)
	if err != nil {
		return vfiouser.Capabilities{}, err
	}
	r, err := c.Call(vfiouser.CmdVersion, nil, v.Append(nil))
	if err != nil {
		return vfiouser.Capabilities{}, err
	}
	defer c.releaseMsg(r)
	rv, err := vfiouser.DecodeVersion(r.Payload)
	if err != nil {
		return vfiouser.Capabilities{}, err
	}
	if rv.Major != 0 || rv.Minor != 0 {
		return vfiouser.Capabilities{}, fmt.Errorf("server version %d.%d, want 0.0", rv.Major, rv.Minor)
	}
	if n := len(r.Payload); n > vfiouser.VersionHeadSize && r.Payload[n-1] != 0 {
		return vfiouser.Capabilities{}, errors.New("server VERSION JSON is not NUL-terminated")
	}
	caps, err := vfiouser.ParseCapabilities(rv.JSON)
	if err != nil {
		return vfiouser.Capabilities{}, err
	}
	c.serverCaps = caps
	c.ourMaxXfer = vfiouser.MaxDataXferSize
	if ours.MaxDataXferSize != 0 {
		c.ourMaxXfer = ours.MaxDataXferSize
	}
	return caps, nil
}

// serverMaxXfer is the largest REGION_READ/WRITE count the server takes.
func (c *Client) serverMaxXfer() int {
	if n := c.serverCaps.MaxDataXferSize; n > 0 && n < vfiouser.MaxDataXferSize {
		return int(n)
	}
	return vfiouser.MaxDataXferSize
}

// serverMaxFDs is how many fds one message to the server may carry (QEMU's default when the
// server does not say is 8, capped at 16).
func (c *Client) serverMaxFDs() int {
	n := c.serverCaps.MaxMsgFDs
	if n == 0 {
		return 8
	}
	return int(min(n, 16))
}

// Reset sends DEVICE_RESET.
func (c *Client) Reset() error { return c.simple(vfiouser.CmdDeviceReset, nil) }

// simple sends a command whose reply payload is of no interest.
func (c *Client) simple(cmd vfiouser.Command, fds []int, parts ...[]byte) error {
	r, err := c.Call(cmd, fds, parts...)
	if r != nil {
		c.releaseMsg(r)
	}
	return err
}

// DeviceInfo sends DEVICE_GET_INFO.
func (c *Client) DeviceInfo() (vfiouser.DeviceInfoMsg, error) {
	r, err := c.Call(vfiouser.CmdDeviceGetInfo, nil, vfiouser.DeviceInfoMsg{Argsz: vfiouser.DeviceInfoSize}.Append(nil))
	if err != nil {
		return vfiouser.DeviceInfoMsg{}, err
	}
	defer c.releaseMsg(r)
	return vfiouser.DecodeDeviceInfo(r.Payload)
}

// IRQInfo sends DEVICE_GET_IRQ_INFO.
func (c *Client) IRQInfo(index uint32) (vfiouser.IRQInfoMsg, error) {
	r, err := c.Call(vfiouser.CmdDeviceGetIRQInfo, nil,
		vfiouser.IRQInfoMsg{Argsz: vfiouser.IRQInfoSize, Index: index}.Append(nil))
	if err != nil {
		return vfiouser.IRQInfoMsg{}, err
	}
	defer c.releaseMsg(r)
	return vfiouser.DecodeIRQInfo(r.Payload)
}

// RegionInfo is one region as the client learned it.
type RegionInfo struct {
	vfiouser.RegionInfoMsg
	Sparse []vfiouser.SparseArea
	// File is the region's fd when MMAP is set; the caller closes it.
	File *os.File
}

// RegionInfo asks like QEMU: with argsz 32 first, then again with the argsz the server says it
// needs (closing the fd of the first answer), keeping the fd of the final answer.
func (c *Client) RegionInfo(index uint32) (RegionInfo, error) {
	argsz := uint32(vfiouser.RegionInfoSize)
	for try := 0; ; try++ {
		ri, fds, err := c.regionInfoOnce(index, argsz)
		if err != nil {
			return RegionInfo{}, err
		}
		if ri.Argsz > argsz && try == 0 {
			closeAll(fds)
			argsz = ri.Argsz
			continue
		}
		if len(fds) > 1 {
			closeAll(fds)
			return RegionInfo{}, fmt.Errorf("region %d: %d fds in reply, QEMU accepts one", index, len(fds))
		}
		if len(fds) == 1 {
			ri.File = os.NewFile(uintptr(fds[0]), fmt.Sprintf("region-%d", index))
		}
		return ri, nil
	}
}

func (c *Client) regionInfoOnce(index, argsz uint32) (RegionInfo, []int, error) {
	r, err := c.Call(vfiouser.CmdDeviceGetRegionInfo, nil,
		vfiouser.RegionInfoMsg{Argsz: argsz, Index: index}.Append(nil))
	if err != nil {
		if r != nil {
			r.CloseFDs()
		}
		return RegionInfo{}, nil, err
	}
	fds := append([]int(nil), r.FDs...)
	r.FDs = r.FDs[:0]
	defer c.releaseMsg(r)
	if uint32(len(r.Payload)) > argsz {
		closeAll(fds)
		return RegionInfo{}, nil, fmt.Errorf("region %d: reply payload %d exceeds argsz %d", index, len(r.Payload), argsz)
	}
	info, err := vfiouser.DecodeRegionInfo(r.Payload)
	if err != nil {
		closeAll(fds)
		return RegionInfo{}, nil, err
	}
	sparse, err := vfiouser.DecodeRegionCaps(r.Payload)
	if err != nil {
		closeAll(fds)
		return RegionInfo{}, nil, err
	}
	return RegionInfo{RegionInfoMsg: info, Sparse: sparse}, fds, nil
}

// Read reads p from a region with REGION_READ, split at the server's max_data_xfer_size.
func (c *Client) Read(region uint32, off uint64, p []byte) error {
	for len(p) > 0 {
		n := min(len(p), c.serverMaxXfer())
		if err := c.readOnce(region, off, p[:n]); err != nil {
			return err
		}
		p, off = p[n:], off+uint64(n)
	}
	return nil
}

func (c *Client) readOnce(region uint32, off uint64, p []byte) error {
	var head [vfiouser.RegionAccessSize]byte
	want := vfiouser.RegionAccess{Offset: off, Region: region, Count: uint32(len(p))}
	r, err := c.Call(vfiouser.CmdRegionRead, nil, want.Append(head[:0]))
	if r != nil {
		defer c.releaseMsg(r)
	}
	if err != nil {
		return err
	}
	got, data, err := vfiouser.DecodeRegionAccess(r.Payload)
	if err != nil {
		return err
	}
	if got != want || len(data) != len(p) {
		return fmt.Errorf("REGION_READ reply %v with %d bytes for %v", got, len(data), want)
	}
	copy(p, data)
	return nil
}

// Write writes p to a region with REGION_WRITE and waits for each reply.
func (c *Client) Write(region uint32, off uint64, p []byte) error {
	return c.write(region, off, p, false)
}

// PostWrite writes p with NO_REPLY (QEMU's posted writes) and does not wait.
func (c *Client) PostWrite(region uint32, off uint64, p []byte) error {
	return c.write(region, off, p, true)
}

func (c *Client) write(region uint32, off uint64, p []byte, posted bool) error {
	for len(p) > 0 {
		n := min(len(p), c.serverMaxXfer())
		head := vfiouser.RegionAccess{Offset: off, Region: region, Count: uint32(n)}.Append(nil)
		var err error
		if posted {
			err = c.Post(vfiouser.CmdRegionWrite, nil, head, p[:n])
		} else {
			err = c.simple(vfiouser.CmdRegionWrite, nil, head, p[:n])
		}
		if err != nil {
			return err
		}
		p, off = p[n:], off+uint64(n)
	}
	return nil
}

// WriteMulti sends one REGION_WRITE_MULTI; posted sets NO_REPLY as QEMU always does.
func (c *Client) WriteMulti(entries []vfiouser.WriteMultiEntry, posted bool) error {
	payload := vfiouser.AppendWriteMulti(nil, entries)
	if posted {
		return c.Post(vfiouser.CmdRegionWriteMulti, nil, payload)
	}
	return c.simple(vfiouser.CmdRegionWriteMulti, nil, payload)
}

// Sync waits until the server has processed everything sent before (a reply to a younger
// command implies older ones are done), using a harmless DEVICE_GET_INFO.
func (c *Client) Sync() error {
	_, err := c.DeviceInfo()
	return err
}
