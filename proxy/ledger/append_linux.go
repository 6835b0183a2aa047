package ledger

import (
	"io"
	"os"
	"syscall"
	"unsafe"
)

// appendJournal writes b at the journal's end: with a raw write(2) when
// Options.RawAppends asks (see there why), else through os.File.
func (l *Ledger) appendJournal(b []byte) (int, error) {
	if !l.rawAppends {
		return l.journal.Write(b)
	}
	return rawAppend(l.journal, b)
}

// rawAppend writes all of b to f, an O_APPEND regular file, with raw
// write(2) calls.
func rawAppend(f *os.File, b []byte) (int, error) {
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	done := 0
	var errno syscall.Errno
	short := false
	if err := rc.Control(func(fd uintptr) {
		for done < len(b) {
			r, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&b[done])), uintptr(len(b)-done))
			switch {
			case e == syscall.EINTR:
				continue
			case e != 0:
				errno = e
			case r == 0:
				short = true // no progress, as os.File reports it
			default:
				done += int(r)
				continue
			}
			return
		}
	}); err != nil {
		return done, err
	}
	switch {
	case errno != 0:
		return done, &os.PathError{Op: "write", Path: f.Name(), Err: errno}
	case short:
		return done, &os.PathError{Op: "write", Path: f.Name(), Err: io.ErrShortWrite}
	}
	return done, nil
}
