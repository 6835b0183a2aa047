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

// rawPipe reads and writes a nonblocking pipe, or a stream socket (as
// Node's child_process gives a child for stdio), with raw system calls, the
// poller waiting when it is empty (or full).
//
// Why: every system call made through the scheduler (os.File.Read/Write)
// wakes the runtime's monitor thread when the process was idle, and a
// relay is idle between every message: two futex calls and a thread
// switch per hop, measured at about a fifth of the stdio proxy's CPU per
// call on 2 cores. A read or write of a nonblocking pipe never blocks, so
// it needs no hand-off; the wait, when there is one, stays the poller's. A
// socket is read and written with MSG_DONTWAIT, which needs no nonblocking
// flag on a file that may be shared.
type rawPipe struct {
	name string
	rc   syscall.RawConn
	sock bool

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

// rawPipeOf returns v as a rawPipe when it is a file the poller waits on
// and a nonblocking pipe (as os.Pipe and exec's pipes are) or a stream
// socket; nil otherwise.
func rawPipeOf(v any) *rawPipe {
	pipe, sock := false, false
	f, rc := withFile(v, func(fd uintptr, typ uint32) {
		switch typ {
		case syscall.S_IFIFO:
			fl, _, e := syscall.RawSyscall(syscall.SYS_FCNTL, fd, syscall.F_GETFL, 0)
			pipe = e == 0 && fl&syscall.O_NONBLOCK != 0
		case syscall.S_IFSOCK:
			typ, err := syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_TYPE)
			sock = err == nil && typ == syscall.SOCK_STREAM
		}
	})
	// A file the poller does not wait on has no deadlines.
	if !pipe && !sock || f.SetDeadline(time.Time{}) != nil {
		return nil
	}
	p := &rawPipe{name: f.Name(), rc: rc, sock: sock}
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
	n := p.rn
	p.rbuf = nil
	if err := p.opErr("read", err, p.rerrno); err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, io.EOF
	}
	return n, nil
}

// opErr is a read's or write's error: rcErr from the poller (the only one
// a pollable file without deadlines has: closed), else errno.
func (p *rawPipe) opErr(op string, rcErr error, errno syscall.Errno) error {
	switch {
	case rcErr != nil:
		return &os.PathError{Op: op, Path: p.name, Err: os.ErrClosed}
	case errno != 0:
		return &os.PathError{Op: op, Path: p.name, Err: errno}
	}
	return nil
}

// readOnce is one read(2) of rbuf; false asks the poller to wait.
func (p *rawPipe) readOnce(fd uintptr) bool {
	for {
		var r uintptr
		var e syscall.Errno
		if p.sock {
			r, _, e = syscall.RawSyscall6(syscall.SYS_RECVFROM, fd, uintptr(unsafe.Pointer(&p.rbuf[0])), uintptr(len(p.rbuf)), syscall.MSG_DONTWAIT, 0, 0)
		} else {
			r, _, e = syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&p.rbuf[0])), uintptr(len(p.rbuf)))
		}
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
	done := p.wdone
	p.wbuf = nil
	return done, p.opErr("write", err, p.werrno)
}

// writeAll writes wbuf from wdone on; false (the pipe is full) asks the
// poller to wait.
func (p *rawPipe) writeAll(fd uintptr) bool {
	for p.wdone < len(p.wbuf) {
		var r uintptr
		var e syscall.Errno
		b := unsafe.Pointer(&p.wbuf[p.wdone])
		if p.sock {
			r, _, e = syscall.RawSyscall6(syscall.SYS_SENDTO, fd, uintptr(b), uintptr(len(p.wbuf)-p.wdone), syscall.MSG_DONTWAIT|syscall.MSG_NOSIGNAL, 0, 0)
		} else {
			r, _, e = syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(b), uintptr(len(p.wbuf)-p.wdone))
		}
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

// pollableStdio opens the proxy's stdin or stdout (f) again so that the
// poller waits on it and rawPipe reads or writes it; nil when f is neither
// a pipe nor a stream socket, or cannot be opened again (no /proc).
//
// The new file must not change f's own open file, which the process that
// gave it (the MCP client, a shell) may share: a pipe is opened again
// through /proc/self/fd as a nonblocking file of its own; a socket (which
// cannot be opened again) is duplicated, its shared flags made
// nonblocking only while the poller takes the duplicate, then restored
// (rawPipe's socket calls say MSG_DONTWAIT instead).
func pollableStdio(v any, write bool) *os.File {
	var nf *os.File
	withFile(v, func(fd uintptr, typ uint32) {
		switch typ {
		case syscall.S_IFIFO:
			flag := syscall.O_RDONLY
			if write {
				flag = syscall.O_WRONLY
			}
			nf, _ = os.OpenFile("/proc/self/fd/"+strconv.Itoa(int(fd)), flag|syscall.O_NONBLOCK, 0)
		case syscall.S_IFSOCK:
			nf = pollableSocket(int(fd), v.(*os.File).Name())
		}
	})
	return nf
}

// withFile runs fn with the descriptor of v, an open *os.File, and its file
// type (the S_IFMT bits); nothing when v is not one.
func withFile(v any, fn func(fd uintptr, typ uint32)) (*os.File, syscall.RawConn) {
	f, ok := v.(*os.File)
	if !ok || f == nil {
		return nil, nil
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return nil, nil
	}
	_ = rc.Control(func(fd uintptr) {
		var st syscall.Stat_t
		if syscall.Fstat(int(fd), &st) == nil {
			fn(fd, st.Mode&syscall.S_IFMT)
		}
	})
	return f, rc
}

func pollableSocket(fd int, name string) *os.File {
	if typ, err := syscall.GetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_TYPE); err != nil || typ != syscall.SOCK_STREAM {
		return nil
	}
	dup, _, e := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_DUPFD_CLOEXEC, 0)
	if e != 0 {
		return nil
	}
	fl, _, e := syscall.Syscall(syscall.SYS_FCNTL, dup, syscall.F_GETFL, 0)
	if e != 0 {
		syscall.Close(int(dup))
		return nil
	}
	blocking := fl&syscall.O_NONBLOCK == 0
	if blocking {
		if err := syscall.SetNonblock(int(dup), true); err != nil {
			syscall.Close(int(dup))
			return nil
		}
	}
	nf := os.NewFile(dup, name) // nonblocking now: the poller takes it
	if blocking {
		if err := syscall.SetNonblock(int(dup), false); err != nil {
			nf.Close()
			return nil
		}
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
