package proxy

import (
	"io"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// rawPipe reads and writes a nonblocking pipe with raw system calls, the
// poller waiting when the pipe is empty (or full).
//
// Why: every system call made through the scheduler (os.File.Read/Write)
// wakes the runtime's monitor thread when the process was idle, and a
// relay is idle between every message: two futex calls and a thread
// switch per hop, measured at about a fifth of the stdio proxy's CPU per
// call on 2 cores. A read or write of a nonblocking pipe never blocks, so
// it needs no hand-off; the wait, when there is one, stays the poller's.
type rawPipe struct {
	name string
	rc   syscall.RawConn

	// The calls' state, so that the functions handed to rc are made once
	// (a closure per call would be two allocations per message).
	rmu    sync.Mutex
	rbuf   []byte
	rn     int
	rerrno syscall.Errno
	readFn func(uintptr) bool

	wmu     sync.Mutex
	wbuf    []byte
	wdone   int
	werrno  syscall.Errno
	writeFn func(uintptr) bool
}

// rawPipeOf returns f as a rawPipe when it is a pipe the poller waits on
// (nonblocking, as os.Pipe and exec's pipes are); nil otherwise.
func rawPipeOf(v any) *rawPipe {
	f, ok := v.(*os.File)
	if !ok || f == nil {
		return nil
	}
	// A file the poller does not wait on has no deadlines.
	if f.SetDeadline(time.Time{}) != nil {
		return nil
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return nil
	}
	pipe := false
	_ = rc.Control(func(fd uintptr) {
		var st syscall.Stat_t
		fl, _, e := syscall.RawSyscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0)
		pipe = e == 0 && fl&syscall.O_NONBLOCK != 0 &&
			syscall.Fstat(int(fd), &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFIFO
	})
	if !pipe {
		return nil
	}
	p := &rawPipe{name: f.Name(), rc: rc}
	p.readFn, p.writeFn = p.readOnce, p.writeAll
	return p
}

func (p *rawPipe) Read(b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	p.rmu.Lock()
	defer p.rmu.Unlock()
	p.rbuf, p.rn, p.rerrno = b, 0, 0
	err := p.rc.Read(p.readFn)
	n, errno := p.rn, p.rerrno
	p.rbuf = nil
	switch {
	case err != nil:
		// The only error of a pollable file without deadlines: closed.
		return 0, &os.PathError{Op: "read", Path: p.name, Err: os.ErrClosed}
	case errno != 0:
		return 0, &os.PathError{Op: "read", Path: p.name, Err: errno}
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

// readOnce is one read(2) of rbuf; false asks the poller to wait.
func (p *rawPipe) readOnce(fd uintptr) bool {
	for {
		r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p.rbuf[0])), uintptr(len(p.rbuf)))
		switch e {
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		}
		p.rn, p.rerrno = int(r), e
		return true
	}
}

// Write writes all of b, waiting while the pipe is full.
func (p *rawPipe) Write(b []byte) (int, error) {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	p.wbuf, p.wdone, p.werrno = b, 0, 0
	err := p.rc.Write(p.writeFn)
	done, errno := p.wdone, p.werrno
	p.wbuf = nil
	switch {
	case err != nil:
		return done, &os.PathError{Op: "write", Path: p.name, Err: os.ErrClosed}
	case errno != 0:
		return done, &os.PathError{Op: "write", Path: p.name, Err: errno}
	}
	return done, nil
}

// writeAll writes wbuf from wdone on; false (the pipe is full) asks the
// poller to wait.
func (p *rawPipe) writeAll(fd uintptr) bool {
	for p.wdone < len(p.wbuf) {
		r, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&p.wbuf[p.wdone])), uintptr(len(p.wbuf)-p.wdone))
		switch e {
		case 0:
			p.wdone += int(r)
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			p.werrno = e
			return true
		}
	}
	return true
}

// nonblockingPipe opens the pipe f (the proxy's stdin or stdout) again,
// nonblocking, so that the poller waits on it: a new open file of the same
// pipe, because the nonblocking flag of f's own would also change it for
// the process that shares it (the MCP client, a shell). nil when f is not a
// pipe or cannot be opened again (no /proc).
func nonblockingPipe(v any, write bool) *os.File {
	f, ok := v.(*os.File)
	if !ok || f == nil {
		return nil
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return nil
	}
	path := ""
	_ = rc.Control(func(fd uintptr) {
		var st syscall.Stat_t
		if syscall.Fstat(int(fd), &st) == nil && st.Mode&syscall.S_IFMT == syscall.S_IFIFO {
			path = "/proc/self/fd/" + strconv.Itoa(int(fd))
		}
	})
	if path == "" {
		return nil
	}
	flag := syscall.O_RDONLY
	if write {
		flag = syscall.O_WRONLY
	}
	nf, err := os.OpenFile(path, flag|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil
	}
	return nf
}

// rawIO is f as a rawPipe when it is one (rawPipeOf), else f. F is
// io.Reader or io.Writer.
func rawIO[F any](f F) F {
	if p := rawPipeOf(f); p != nil {
		if v, ok := any(p).(F); ok {
			return v
		}
	}
	return f
}
