package proxy

import (
	"context"
	"encoding/json"
	"sync"
	"time"
)

// What forward needs to send a granted call upstream, whichever transport
// the call came by.

// forwardedCall is a call sent upstream whose answer is still to come. It
// ends once: with the upstream's answer (Go's done), or by cancel (the call
// timeout, the client), which wins only while the request is pending.
type forwardedCall struct {
	timer  *time.Timer
	finish func(res json.RawMessage, err error, cause string)

	mu       sync.Mutex
	stop     func(reason string) bool // from Upstream.Go; nil until sent
	cancelAs string                   // a cancel that came before the request was sent
}

// sent records what Upstream.Go returned; a failed send ends the call now,
// and a cancel that came first is carried out now.
func (pc *forwardedCall) sent(stop func(string) bool, err error) {
	if err != nil {
		pc.timer.Stop()
		pc.finish(nil, err, "")
		return
	}
	pc.mu.Lock()
	pc.stop = stop
	cause := pc.cancelAs
	pc.mu.Unlock()
	if cause != "" {
		pc.cancel(cause)
	}
}

func (pc *forwardedCall) cancel(cause string) {
	pc.mu.Lock()
	stop := pc.stop
	if stop == nil {
		if pc.cancelAs == "" {
			pc.cancelAs = cause
		}
		pc.mu.Unlock()
		return
	}
	pc.mu.Unlock()
	reason := "cancelled by the client"
	if cause == causeTimeout {
		reason = "timed out"
	}
	if stop(reason) {
		pc.timer.Stop()
		err := context.Canceled
		if cause == causeTimeout {
			err = context.DeadlineExceeded
		}
		pc.finish(nil, err, cause)
	}
}
