package mes

// Rate-limiter keys: every log line a guest can cause goes through one of these.
const (
	logKeyFrame = "mes.frame" // a frame failed
	logKeyRing  = "mes.ring"  // the API ring halted, rptr report failed
	logKeyHang  = "mes.hang"  // a queue was marked hung
	logKeySave  = "mes.save"  // an MQD or context could not be read or written
	logKeyPoll  = "mes.poll"  // a wptr shadow could not be read
	logKeyLog   = "mes.log"   // the event log became unwritable
	logKeyClose = "mes.close" // Close found the goroutine stuck
)
