package irq

import (
	"errors"

	"golang.org/x/sys/unix"
)

// sendKind names the interrupt a send is for.
type sendKind uint8

const (
	sendMSIX sendKind = iota
	sendINTx
	sendErr
	sendReq
)

func (k sendKind) String() string {
	return [...]string{"MSI-X", "INTx", "ERR", "REQ"}[k]
}

// send is one eventfd write, decided under the controller's lock and made after it is
// released: the descriptor belongs to the client, and nothing the client does with it may hold
// up the paths that need the lock (the worker's SET_IRQS, other engines' interrupts).
type send struct {
	to   *eventfd
	kind sendKind
	n    int // MSI-X vector
}

// maxRetarget bounds how often one MSI-X signal follows its vector to a new eventfd. Each
// retry needs the client to have replaced the eventfd meanwhile; past the bound the interrupt
// is left pending in the PBA, as if the vector had had no eventfd.
const maxRetarget = 4

// send writes s's eventfd and counts the outcome. The eventfd may have been replaced and
// closed since the lock was dropped: the os.File keeps its descriptor number alive while a
// write is under way, so the write reaches either that eventfd or nothing (errClosed); an
// MSI-X signal then goes to whatever the vector has now, or pends.
func (c *Controller) send(s send) {
	for try := 0; ; try++ {
		err := s.to.signal()
		switch {
		case err == nil:
			c.countSent(s)
			return
		case errors.Is(err, unix.EAGAIN):
			// The counter is at its maximum: the reader sees it non-zero, so the interrupt is
			// pending there anyway. The client is not reading its eventfd.
			c.saturated.Add(1)
			c.log().Info(logKeySaturated, "irq: eventfd counter saturated; signal coalesced", "irq", s.kind.String(), "n", s.n)
			return
		case errors.Is(err, errClosed) && s.kind == sendMSIX:
			c.mu.Lock()
			next, ok := c.retargetLocked(s, try < maxRetarget)
			c.mu.Unlock()
			if !ok {
				return
			}
			c.retargeted.Add(1)
			s = next
		case errors.Is(err, errClosed) && s.kind == sendINTx:
			// The trigger was replaced or removed; assigning a new one signals it while the
			// line is asserted, so the level is not lost.
			return
		default:
			c.dropped.Add(1)
			c.log().Warn(logKeyFailed, "irq: eventfd write failed; interrupt dropped", "irq", s.kind.String(), "n", s.n, "err", err)
			return
		}
	}
}

// retargetLocked re-decides an MSI-X signal whose eventfd was closed under it: the vector's
// current eventfd if it may be signalled (and retry allows), else its pending bit.
func (c *Controller) retargetLocked(s send, retry bool) (send, bool) {
	v := &c.msix[s.n]
	if retry && v.fd != s.to && c.deliverableLocked(s.n) {
		return send{to: v.fd, kind: sendMSIX, n: s.n}, true
	}
	v.pending = true
	return send{}, false
}

func (c *Controller) countSent(s send) {
	switch s.kind {
	case sendMSIX:
		c.delivered[s.n].Add(1)
	case sendINTx:
		c.intxN.Add(1)
	case sendErr:
		c.errN.Add(1)
	case sendReq:
		c.reqN.Add(1)
	}
}
