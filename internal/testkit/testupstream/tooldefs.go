package testupstream

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"
)

// ToolDefs (--mode tool-defs --tools-file FILE) serves over stdio the tool
// definitions FILE holds (a JSON array of tools/list entries, byte for byte),
// one per tools/list page, and answers every tools/call with the text
// "called NAME". When FILE changes it sends notifications/tools/list_changed,
// so a test can change a definition mid-session by rewriting the file.
const ToolDefs Mode = "tool-defs"

// toolDefsPoll is how often the file is looked at.
const toolDefsPoll = 20 * time.Millisecond

func serveToolDefs(ctx context.Context, cfg Config, stdin io.Reader, stdout io.Writer, rec *recorder) error {
	if cfg.ToolsFile == "" {
		return fmt.Errorf("mode %s needs --tools-file", ToolDefs)
	}
	read := func() ([]json.RawMessage, []byte, error) {
		b, err := os.ReadFile(cfg.ToolsFile)
		if err != nil {
			return nil, nil, err
		}
		var defs []json.RawMessage
		if err := json.Unmarshal(b, &defs); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", cfg.ToolsFile, err)
		}
		return defs, b, nil
	}
	_, last, err := read()
	if err != nil {
		return err
	}
	out := newLockedWriter(stdout)
	send := func(v any) {
		b, _ := json.Marshal(v)
		out.mu.Lock()
		defer out.mu.Unlock()
		_, _ = out.w.Write(append(b, '\n'))
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		t := time.NewTicker(toolDefsPoll)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if _, b, err := read(); err == nil && !bytes.Equal(b, last) {
				last = b
				send(map[string]any{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
			}
		}
	}()
	sc := bufio.NewScanner(stdin)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Cursor    string          `json:"cursor"`
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			} `json:"params"`
		}
		if json.Unmarshal(sc.Bytes(), &req) != nil || len(req.ID) == 0 {
			continue // a notification or a response: nothing to answer
		}
		answer := func(result any) {
			send(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": result})
		}
		switch req.Method {
		case "initialize":
			answer(map[string]any{"protocolVersion": "2025-06-18", "serverInfo": map[string]any{"name": "testupstream", "version": "1"},
				"capabilities": map[string]any{"tools": map[string]any{"listChanged": true}}})
		case "ping":
			answer(map[string]any{})
		case "tools/list":
			defs, _, err := read()
			if err != nil {
				send(map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": map[string]any{"code": -32603, "message": err.Error()}})
				continue
			}
			i, _ := strconv.Atoi(req.Params.Cursor)
			res := map[string]any{"tools": []json.RawMessage{}}
			if i < len(defs) {
				res["tools"] = defs[i : i+1]
			}
			if i+1 < len(defs) {
				res["nextCursor"] = strconv.Itoa(i + 1)
			}
			answer(res)
		case "tools/call":
			rec.record(req.Params.Name, req.Params.Arguments)
			answer(map[string]any{"content": []any{map[string]any{"type": "text", "text": "called " + req.Params.Name}}})
		default:
			send(map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": map[string]any{"code": -32601, "message": "method not found: " + req.Method}})
		}
	}
	return sc.Err()
}
