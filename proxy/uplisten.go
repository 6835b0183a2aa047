package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mark3labs/mcp-go/mcp"
)

// planlock's own subscriptions/listen toward a modern upstream. Protocol
// 2026-07-28 has no resources/subscribe and no standalone GET stream: a
// client opts in to notifications on one long-lived listen request, which
// the server acknowledges (notifications/subscriptions/acknowledged, tagged
// with the request's id) and then holds open, delivering what it opted in
// to. planlock keeps one such stream per connection, for the union of what
// its clients subscribed to that the plan allows (never a refused URI: the
// gate decides before a URI reaches this set) and the list changes it
// re-reads; a change of the set replaces the stream. What the stream
// delivers reaches relayNotification as the legacy notifications do.

// upListen is the state of the listen stream of an Upstream.
type upListen struct {
	mu     sync.Mutex // serialises replacing the stream
	cancel context.CancelFunc
	gen    uint64 // the current stream's number

	wmu     sync.Mutex
	waiters map[string]*listenWaiter // by the listen request's id
}

// listenWaiter waits for the acknowledgement of one listen request.
type listenWaiter struct {
	acked chan mcp.SubscriptionFilter
	// live: the acknowledgement names something to deliver. Set when it
	// is read, before the stream's end can be (the stream carries the
	// acknowledgement first).
	live atomic.Bool
}

// Modern reports whether the current connection speaks protocol 2026-07-28.
func (u *Upstream) Modern() bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.conn != nil && u.conn.version != ""
}

// Relisten replaces the listen stream of the current (modern) connection
// with one for u.listenFilter, and returns what the upstream acknowledged.
func (u *Upstream) Relisten(ctx context.Context) (mcp.SubscriptionFilter, error) {
	u.mu.Lock()
	c, last := u.conn, u.lastErr
	u.mu.Unlock()
	if c == nil {
		return mcp.SubscriptionFilter{}, fmt.Errorf("%w: %v", ErrUnavailable, last)
	}
	return u.relisten(ctx, c)
}

// relisten opens a listen stream on c for what u.listenFilter wants (when
// it wants nothing, the open stream just ends) and waits for the
// upstream's acknowledgement, the stream's end, or ctx.
func (u *Upstream) relisten(ctx context.Context, c *upConn) (mcp.SubscriptionFilter, error) {
	if c.version == "" {
		return mcp.SubscriptionFilter{}, errors.New("subscriptions/listen needs a modern upstream")
	}
	l := &u.listen
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cancel != nil {
		l.cancel()
		l.cancel = nil
	}
	var f mcp.SubscriptionFilter
	if u.listenFilter != nil {
		f = u.listenFilter()
	}
	if f.IsEmpty() {
		return f, nil
	}
	id := u.nextID.Add(1)
	key := fmt.Sprint(id)
	w := &listenWaiter{acked: make(chan mcp.SubscriptionFilter, 1)}
	l.wmu.Lock()
	if l.waiters == nil {
		l.waiters = map[string]*listenWaiter{}
	}
	l.waiters[key] = w
	l.wmu.Unlock()
	// The stream lives until it is replaced or the connection ends, not
	// as long as the request that opened it.
	sctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	l.gen++
	gen := l.gen
	go func() {
		select {
		case <-c.dead:
			cancel()
		case <-sctx.Done():
		}
	}()
	ended := make(chan error, 1)
	go func() {
		_, err := u.sendID(sctx, c, id, string(mcp.MethodSubscriptionsListen), map[string]any{"notifications": f})
		l.wmu.Lock()
		delete(l.waiters, key)
		l.wmu.Unlock()
		if err == nil {
			err = errors.New("the upstream ended the listen stream")
		}
		ended <- err
		if sctx.Err() == nil && w.live.Load() {
			// Neither replaced nor its connection gone: the upstream
			// ended it (a modern HTTP server restarted, say). What it
			// carried is listened for again, after a pause.
			go u.listenAgain(c, gen)
		}
	}()
	select {
	case a := <-w.acked:
		return a, nil
	case err := <-ended:
		// The acknowledgement comes before the end on the stream, but
		// both may be ready here: a stream acknowledged then ended at once
		// was acknowledged (and is listened for again).
		select {
		case a := <-w.acked:
			return a, nil
		default:
		}
		return mcp.SubscriptionFilter{}, fmt.Errorf("subscriptions/listen: %w", err)
	case <-ctx.Done():
		cancel()
		l.cancel = nil
		return mcp.SubscriptionFilter{}, fmt.Errorf("subscriptions/listen: no acknowledgement: %w", ctx.Err())
	}
}

// listenAcked takes a notifications/subscriptions/acknowledged to the
// listen request it answers; it reports whether n was one.
func (u *Upstream) listenAcked(n mcp.JSONRPCNotification) bool {
	if n.Method != mcp.MethodNotificationSubscriptionsAcknowledged {
		return false
	}
	var id any
	if n.Params.Meta != nil {
		id = n.Params.Meta[mcp.MetaKeySubscriptionID]
	}
	var f mcp.SubscriptionFilter
	if b, err := json.Marshal(n.Params.AdditionalFields["notifications"]); err == nil {
		_ = json.Unmarshal(b, &f)
	}
	l := &u.listen
	l.wmu.Lock()
	w := l.waiters[fmt.Sprint(id)]
	delete(l.waiters, fmt.Sprint(id))
	l.wmu.Unlock()
	if w != nil {
		// A stream whose acknowledgement names nothing ends at once, and
		// is not opened again.
		w.live.Store(!f.IsEmpty())
		w.acked <- f
	}
	return true
}

// listenAgainDelay is the pause before a stream the upstream ended is
// opened again.
const listenAgainDelay = time.Second

// listenAgain opens the listen stream of c again when stream gen, which
// the upstream ended, is still the current one.
func (u *Upstream) listenAgain(c *upConn, gen uint64) {
	select {
	case <-c.dead:
		return
	case <-time.After(listenAgainDelay):
	}
	l := &u.listen
	l.mu.Lock()
	current := l.gen == gen
	l.mu.Unlock()
	if !current {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), u.cfg.InitTimeout)
	defer cancel()
	if _, err := u.relisten(ctx, c); err != nil {
		u.logger().Warn("planlock: upstream " + u.name() + ": " + err.Error())
	}
}
