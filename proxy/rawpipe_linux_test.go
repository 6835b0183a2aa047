package proxy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/planlock/planlock/proxy/ledger"
)

func nonblocking(t *testing.T, f *os.File) bool {
	t.Helper()
	rc, err := f.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var fl uintptr
	if err := rc.Control(func(fd uintptr) {
		fl, _, _ = syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0)
	}); err != nil {
		t.Fatal(err)
	}
	return fl&syscall.O_NONBLOCK != 0
}

// pipe is os.Pipe, closed when the test ends.
func pipe(t *testing.T) (r, w *os.File) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close(); w.Close() })
	return r, w
}

func TestRawPipe(t *testing.T) {
	r, w := pipe(t)
	rr, rw := rawPipeOf(r), rawPipeOf(w)
	if rr == nil || rw == nil {
		t.Fatalf("rawPipeOf(os.Pipe()) = %v, %v; want both", rr, rw)
	}
	// Four times a pipe's buffer: the writer waits for the reader (EAGAIN,
	// the poller), the reader for the writer.
	want := bytes.Repeat([]byte("0123456789abcdef"), 1<<14)
	wrote := make(chan error, 1)
	go func() {
		n, err := rw.Write(want)
		if err == nil && n != len(want) {
			err = io.ErrShortWrite
		}
		w.Close()
		wrote <- err
	}()
	got, err := io.ReadAll(rr)
	if werr := <-wrote; werr != nil {
		t.Fatalf("write: %v", werr)
	}
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("read %d bytes (%v), want the %d written", len(got), err, len(want))
	}
	if n, err := rr.Read(make([]byte, 8)); n != 0 || err != io.EOF {
		t.Fatalf("read after the writer closed: %d, %v; want io.EOF", n, err)
	}
}

// A read waiting on the pipe ends when the file is closed; a write to a
// pipe nobody reads fails with EPIPE (and does not kill the process).
func TestRawPipeClosedAndBroken(t *testing.T) {
	r, w := pipe(t)
	rr := rawPipeOf(r)
	read := make(chan error, 1)
	go func() {
		_, err := rr.Read(make([]byte, 8))
		read <- err
	}()
	time.Sleep(20 * time.Millisecond) // let the read wait in the poller (it passes either way)
	r.Close()
	select {
	case err := <-read:
		if !errors.Is(err, os.ErrClosed) {
			t.Fatalf("read of a closed pipe: %v, want os.ErrClosed", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a read waiting on the pipe did not end when it was closed")
	}
	if _, err := rawPipeOf(w).Write([]byte("x\n")); !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("write to a pipe without reader: %v, want EPIPE", err)
	}
}

func TestRawPipeOfOthers(t *testing.T) {
	file, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	r, _ := pipe(t)
	r.Fd() // a blocking pipe now, as a process's inherited stdin is
	for name, v := range map[string]any{"regular file": file, "blocking pipe": r, "not a file": strings.NewReader(""), "nil file": (*os.File)(nil)} {
		if p := rawPipeOf(v); p != nil {
			t.Errorf("rawPipeOf(%s) = %v, want nil", name, p)
		}
	}
	dgram, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	d0, d1 := os.NewFile(uintptr(dgram[0]), "dgram"), os.NewFile(uintptr(dgram[1]), "dgram")
	defer d0.Close()
	defer d1.Close()
	for name, v := range map[string]any{"regular file": file, "datagram socket": d0, "reader": strings.NewReader("")} {
		if f := pollableStdio(v, false); f != nil {
			f.Close()
			t.Errorf("pollableStdio(%s) = %v, want nil", name, f)
		}
	}
}

// pollableStdio opens a blocking pipe (a process's stdin or stdout) again
// as a nonblocking file of its own, leaving the shared one as it was.
func TestPollableStdioPipe(t *testing.T) {
	r, w := pipe(t)
	r.Fd() // blocking, as inherited
	w.Fd()
	nr, nw := pollableStdio(r, false), pollableStdio(w, true)
	if nr == nil || nw == nil {
		t.Fatalf("pollableStdio = %v, %v; want both", nr, nw)
	}
	defer nr.Close()
	defer nw.Close()
	if nonblocking(t, r) || nonblocking(t, w) || !nonblocking(t, nr) || !nonblocking(t, nw) {
		t.Fatalf("O_NONBLOCK: original %v %v, opened again %v %v; want only the new ones",
			nonblocking(t, r), nonblocking(t, w), nonblocking(t, nr), nonblocking(t, nw))
	}
	if _, err := rawIO[io.Writer](nw).Write([]byte("ping\n")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 5)
	if _, err := io.ReadFull(rawIO[io.Reader](nr), got); err != nil || string(got) != "ping\n" {
		t.Fatalf("read %q, %v through the pipe opened again", got, err)
	}
}

// socketPair is a connected pair of stream sockets, blocking, as
// Node's child_process hands them to a child for its stdio.
func socketPair(t *testing.T) (ours, theirs *os.File) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	ours, theirs = os.NewFile(uintptr(fds[0]), "ours"), os.NewFile(uintptr(fds[1]), "theirs")
	t.Cleanup(func() { ours.Close(); theirs.Close() })
	return ours, theirs
}

// A socket is opened again as a pollable duplicate; its shared flags stay
// blocking, and rawPipe reads and writes it (MSG_DONTWAIT).
func TestPollableStdioSocket(t *testing.T) {
	ours, theirs := socketPair(t)
	dup := pollableStdio(ours, false)
	if dup == nil {
		t.Fatal("pollableStdio(socket) = nil")
	}
	defer dup.Close()
	if nonblocking(t, ours) || nonblocking(t, dup) {
		t.Fatal("the socket's shared open file was left nonblocking")
	}
	rp := rawPipeOf(dup)
	if rp == nil || !rp.sock {
		t.Fatalf("rawPipeOf(duplicate) = %+v, want a socket rawPipe", rp)
	}
	want := bytes.Repeat([]byte("0123456789abcdef"), 1<<14) // more than the socket buffers
	wrote := make(chan error, 1)
	go func() {
		_, err := rp.Write(want)
		wrote <- err
	}()
	got := make([]byte, len(want))
	if _, err := io.ReadFull(theirs, got); err != nil || !bytes.Equal(got, want) {
		t.Fatalf("the peer read %v: %d bytes, want the %d written", err, len(got), len(want))
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if _, err := theirs.Write([]byte("pong\n")); err != nil {
		t.Fatal(err)
	}
	line := make([]byte, 5)
	if _, err := io.ReadFull(rp, line); err != nil || string(line) != "pong\n" {
		t.Fatalf("read %q, %v", line, err)
	}
	theirs.Close()
	if n, err := rp.Read(line); n != 0 || err != io.EOF {
		t.Fatalf("read after the peer closed: %d, %v; want io.EOF", n, err)
	}
	if _, err := rp.Write([]byte("x")); !errors.Is(err, syscall.EPIPE) {
		t.Fatalf("write after the peer closed: %v, want EPIPE", err)
	}
}

// ServeStdio over pipes, or sockets, returns when its context ends, and its
// read of the client's end ends with it, although the client keeps it open.
func TestServeStdioPipeReadEnds(t *testing.T) {
	t.Run("pipes", func(t *testing.T) {
		inR, inW := pipe(t)
		outR, outW := pipe(t)
		inR.Fd() // blocking, as a process's inherited stdin is
		outW.Fd()
		serveStdioEnds(t, inR, inW, outR, outW)
	})
	t.Run("sockets", func(t *testing.T) {
		in, client := socketPair(t)
		serveStdioEnds(t, in, client, client, in)
	})
}

func serveStdioEnds(t *testing.T, inR io.Reader, inW io.Writer, outR io.Reader, outW io.Writer) {
	p, _ := newInProcessProxy(t, benchPlan, noState{}, ledger.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.ServeStdio(ctx, inR, outW) }()
	if _, err := io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"ping"}`+"\n"); err != nil {
		t.Fatal(err)
	}
	line := make([]byte, 256)
	if n, err := outR.Read(line); err != nil || !strings.Contains(string(line[:n]), `"id":1`) {
		t.Fatalf("answer %q, %v", line[:n], err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("ServeStdio: %v", err)
	}
	for deadline := time.Now().Add(10 * time.Second); stackHas("(*lineReader).loop"); {
		if time.Now().After(deadline) {
			t.Fatal("the read of the client's pipe still waits after ServeStdio returned")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func stackHas(fn string) bool {
	buf := make([]byte, 1<<20)
	return strings.Contains(string(buf[:runtime.Stack(buf, true)]), fn)
}
