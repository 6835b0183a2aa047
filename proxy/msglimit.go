package proxy

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/mark3labs/mcp-go/mcp"
)

// DefaultMaxMessageBytes bounds one client message (one stdio line, one
// HTTP request body) unless Config.MaxMessageBytes says otherwise.
const DefaultMaxMessageBytes = 16 << 20

// syncWriter serialises whole writes: the MCP server's answers and the
// limiter's errors share the client's stdout, one line per Write.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(b)
}

// limitLines passes the client's stdio lines of at most max bytes on to the
// MCP server (the returned reader yields them) and answers each longer line
// itself with a JSON-RPC error, without ever holding more than max bytes of
// it: mcp-go reads a line whole, so one huge message would otherwise cost
// several times its size in memory. The bound is kept inside the reader the
// server reads from, so a line reaches it without another goroutine and pipe.
func limitLines(ctx context.Context, in io.Reader, out io.Writer, max int, log io.Writer) *lineLimiter {
	// A buffer of max bytes holds any acceptable line whole (ReadSlice
	// copies nothing); a line that does not fit is streamed through the
	// id scanner and dropped. Pages of the buffer are only touched as big
	// lines arrive.
	return &lineLimiter{ctx: ctx, br: bufio.NewReaderSize(in, max), out: out, max: max, log: log}
}

// copyLimited copies the lines limitLines passes to pass.
func copyLimited(ctx context.Context, in io.Reader, pass io.Writer, out io.Writer, max int, log io.Writer) error {
	_, err := io.Copy(pass, limitLines(ctx, in, out, max, log))
	return err
}

// lineLimiter is the reader limitLines returns.
type lineLimiter struct {
	ctx context.Context
	br  *bufio.Reader
	out io.Writer
	max int
	log io.Writer
	// line is what is left of the current line: a slice of br's buffer,
	// valid until br is read again, which happens only once it is empty.
	line []byte
	err  error // returned once line is empty
}

// nextLine returns the next line that fits whole (its newline included, the
// last one may lack it), valid until the next call; at the end, the error.
func (l *lineLimiter) nextLine() ([]byte, error) {
	for len(l.line) == 0 {
		if l.err != nil {
			return nil, l.err
		}
		l.next()
	}
	line := l.line
	l.line = nil
	return line, nil
}

func (l *lineLimiter) Read(p []byte) (int, error) {
	for len(l.line) == 0 {
		if l.err != nil {
			return 0, l.err
		}
		l.next()
	}
	n := copy(p, l.line)
	l.line = l.line[n:]
	return n, nil
}

// next reads the next line that fits, refusing those that do not.
func (l *lineLimiter) next() {
	if err := l.ctx.Err(); err != nil {
		l.err = err
		return
	}
	line, err := l.br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		over := &idScanner{}
		size := 0
		for errors.Is(err, bufio.ErrBufferFull) {
			over.feed(line)
			size += len(line)
			line, err = l.br.ReadSlice('\n')
		}
		over.feed(line)
		size += len(line)
		line = nil
		fmt.Fprintf(l.log, "planlock proxy: refused a client message of %d bytes (more than --max-message-bytes %d)\n", size, l.max)
		if werr := writeTooLarge(l.out, over.id(), size, l.max); werr != nil {
			l.err = werr
			return
		}
	}
	l.line = line
	if err != nil {
		l.err = err // io.EOF after the last line
	}
}

func writeTooLarge(out io.Writer, id json.RawMessage, size, max int) error {
	if id == nil {
		id = json.RawMessage("null")
	}
	b, err := json.Marshal(map[string]any{
		"jsonrpc": mcp.JSONRPC_VERSION,
		"id":      id,
		"error": map[string]any{
			"code":    mcp.INVALID_REQUEST,
			"message": fmt.Sprintf("planlock: message of %d bytes is larger than the limit of %d bytes (--max-message-bytes); it was not read", size, max),
		},
	})
	if err != nil {
		return err
	}
	_, err = out.Write(append(b, '\n'))
	return err
}

// idScanner finds the top-level "id" of a JSON-RPC message streamed through
// it in pieces, keeping only a few bytes: it tracks strings and nesting, and
// captures the value that follows the key "id" at depth 1.
type idScanner struct {
	depth    int
	inString bool
	escaped  bool
	key      []byte // the current depth-1 string, while it is short
	keyLong  bool
	afterKey bool // a depth-1 string was just closed: it is a key if ':' follows
	capture  bool // inside the value of "id"
	value    []byte
	found    json.RawMessage
}

func (s *idScanner) id() json.RawMessage {
	if s.found == nil && s.capture {
		s.finish()
	}
	if s.found == nil || !json.Valid(s.found) {
		return nil
	}
	var v any
	if json.Unmarshal(s.found, &v) != nil {
		return nil
	}
	switch v.(type) {
	case string, float64:
		return s.found
	}
	return nil // JSON-RPC ids are strings or numbers
}

func (s *idScanner) finish() {
	s.capture = false
	if s.found == nil {
		s.found = append(json.RawMessage(nil), bytesTrim(s.value)...)
	}
	s.value = nil
}

func bytesTrim(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r' || b[0] == '\n') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t' || b[len(b)-1] == '\r' || b[len(b)-1] == '\n') {
		b = b[:len(b)-1]
	}
	return b
}

func (s *idScanner) feed(p []byte) {
	for _, c := range p {
		if s.capture {
			if !s.inString && s.depth == 1 && (c == ',' || c == '}') {
				s.finish()
			} else if !s.inString && (c == ' ' || c == '\t' || c == '\r' || c == '\n') {
				// Space around the value is not part of it and must not
				// count against the length of an id.
			} else if len(s.value) < 256 {
				s.value = append(s.value, c)
			} else {
				s.capture, s.value = false, nil // too long to be an id
			}
		}
		if s.inString {
			switch {
			case s.escaped:
				s.escaped = false
			case c == '\\':
				s.escaped = true
			case c == '"':
				s.inString = false
				if s.depth == 1 && !s.capture {
					s.afterKey = true
				}
			default:
				if s.depth == 1 && !s.capture && !s.keyLong {
					if len(s.key) < 8 {
						s.key = append(s.key, c)
					} else {
						s.keyLong = true
					}
				}
			}
			continue
		}
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		case '"':
			s.inString = true
			if s.depth == 1 && !s.capture {
				s.key, s.keyLong, s.afterKey = s.key[:0], false, false
			}
			continue
		case ':':
			if s.depth == 1 && s.afterKey && !s.keyLong && string(s.key) == "id" && s.found == nil {
				s.capture, s.value = true, nil
			}
		case '{', '[':
			s.depth++
		case '}', ']':
			s.depth--
		}
		s.afterKey = false
	}
}
