package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"

	"github.com/planlock/planlock/internal/datasync"
)

// runFloor is the floor any stdio relay is measured against: it starts the
// upstream and copies lines between the two pipes, understanding nothing
// ("lines"), or with one JSON decode and encode of each message ("json", the
// least a relay that reads messages does), or appending each line from the
// client to the file journal and fdatasyncing it before it is passed on
// ("sync", the least a relay that keeps each call durable before
// forwarding it does). Nothing is checked.
func runFloor(ctx context.Context, mode, journal string, cmd []string, in io.Reader, out, errw io.Writer) error {
	var copyLine func(line []byte, w io.Writer) error
	if (mode == "sync") != (journal != "") {
		return errors.New("--floor-journal goes with --floor sync, and only with it")
	}
	switch mode {
	case "lines":
		copyLine = func(line []byte, w io.Writer) error {
			_, err := w.Write(line)
			return err
		}
	case "sync":
		f, err := os.OpenFile(journal, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return err
		}
		defer f.Close()
		copyLine = func(line []byte, w io.Writer) error {
			if w != out { // toward the upstream
				if _, err := f.Write(line); err != nil {
					return err
				}
				if err := datasync.Sync(f); err != nil {
					return fmt.Errorf("sync %s: %w", journal, err)
				}
			}
			_, err := w.Write(line)
			return err
		}
	case "json":
		copyLine = func(line []byte, w io.Writer) error {
			var v any
			if err := json.Unmarshal(line, &v); err != nil {
				return err
			}
			b, err := json.Marshal(v)
			if err != nil {
				return err
			}
			_, err = w.Write(append(b, '\n'))
			return err
		}
	default:
		return fmt.Errorf("--floor %q: want lines, json or sync", mode)
	}
	if len(cmd) == 0 {
		return errors.New("--floor needs an upstream command after --")
	}
	c := exec.CommandContext(ctx, cmd[0], cmd[1:]...)
	c.Stderr = errw
	upIn, err := c.StdinPipe()
	if err != nil {
		return err
	}
	upOut, err := c.StdoutPipe()
	if err != nil {
		return err
	}
	if err := c.Start(); err != nil {
		return fmt.Errorf("start upstream: %w", err)
	}
	answered := make(chan struct{})
	go func() { defer close(answered); _ = copyLines(upOut, out, copyLine) }()
	err = copyLines(in, upIn, copyLine)
	upIn.Close()
	// Every answer is written to out before the floor returns (the
	// upstream ends its stdout once its stdin ended), and before Wait
	// closes the pipe the copy reads.
	<-answered
	_ = c.Wait()
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// copyLines passes each line of r to copyLine, until r ends.
func copyLines(r io.Reader, w io.Writer, copyLine func([]byte, io.Writer) error) error {
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			if werr := copyLine(line, w); werr != nil {
				return werr
			}
		}
		if err != nil {
			return err
		}
	}
}
