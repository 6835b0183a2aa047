package proxy

import (
	"context"
	"encoding/json"
	"sync"
)

// TEMPORARY stand-in for the raw stdio transport's Go (being built on
// another branch); same contract, with a goroutine per call.
func (u *Upstream) Go(method string, params json.RawMessage, done func(json.RawMessage, error)) (func(string) bool, error) {
	if ok, why := u.Ready(); !ok {
		return nil, why
	}
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	state := 0 // 0 pending, 1 finished, 2 stopped
	go func() {
		res, err := u.Request(ctx, method, json.RawMessage(params))
		mu.Lock()
		if state != 0 {
			mu.Unlock()
			return
		}
		state = 1
		mu.Unlock()
		done(res, err)
	}()
	return func(string) bool {
		mu.Lock()
		defer mu.Unlock()
		if state != 0 {
			return false
		}
		state = 2
		cancel()
		return true
	}, nil
}
