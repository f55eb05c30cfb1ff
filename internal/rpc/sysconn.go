package rpc

import (
	"io"
	"net"
	"syscall"
	"unsafe"
)

// sysConn reads and writes a TCP connection's non-blocking socket with raw
// system calls, waiting on the runtime's network poller when the socket is
// not ready, as net.Conn does. A raw call skips the scheduler's system-call
// bookkeeping, which on a connection that goes quiet between bursts wakes
// the runtime's monitor thread at the first call of each burst. The socket
// never blocks, so no call holds its thread for long, and nothing needs the
// monitor to take the thread's P away meanwhile. The monitor still wakes
// for timers, garbage collections and every other system call, and
// goroutines on the connections block (on the poller) after every burst,
// letting the scheduler poll the network.
//
// Read and Write may run at the same time, on two goroutines; each keeps
// its own state below, used by one call at a time.
type sysConn struct {
	net.Conn
	rc syscall.RawConn

	rp      []byte // the buffer of the Read in progress
	rn      int
	rerr    error
	readFn  func(fd uintptr) bool
	wp      []byte // the bytes of the Write in progress
	wn      int
	werr    error
	writeFn func(fd uintptr) bool
}

// newSysConn wraps nc in a sysConn if it is a TCP connection; otherwise it
// returns nc.
func newSysConn(nc net.Conn) net.Conn {
	tc, ok := nc.(*net.TCPConn)
	if !ok || !sysConnEnabled {
		return nc
	}
	rc, err := tc.SyscallConn()
	if err != nil {
		return nc
	}
	c := &sysConn{Conn: nc, rc: rc}
	c.readFn, c.writeFn = c.doRead, c.doWrite
	return c
}

func (c *sysConn) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	c.rp, c.rn, c.rerr = p, 0, nil
	err := c.rc.Read(c.readFn)
	n, rerr := c.rn, c.rerr
	c.rp, c.rerr = nil, nil
	switch {
	case err != nil:
		return 0, err
	case rerr != nil:
		return 0, &net.OpError{Op: "read", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: rerr}
	case n == 0:
		return 0, io.EOF
	}
	return n, nil
}

func (c *sysConn) doRead(fd uintptr) bool {
	for {
		n, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&c.rp[0])), uintptr(len(c.rp)))
		switch e {
		case 0:
			c.rn = int(n)
			return true
		case syscall.EINTR:
			continue
		case syscall.EAGAIN:
			return false
		}
		c.rerr = e
		return true
	}
}

func (c *sysConn) Write(p []byte) (int, error) {
	c.wp, c.wn, c.werr = p, 0, nil
	var err error
	if len(p) > 0 {
		err = c.rc.Write(c.writeFn)
	}
	n, werr := c.wn, c.werr
	c.wp, c.werr = nil, nil
	switch {
	case err != nil:
		return n, err
	case werr != nil:
		return n, &net.OpError{Op: "write", Net: "tcp", Source: c.LocalAddr(), Addr: c.RemoteAddr(), Err: werr}
	}
	return n, nil
}

func (c *sysConn) doWrite(fd uintptr) bool {
	for c.wn < len(c.wp) {
		n, _, e := syscall.RawSyscall(syscall.SYS_WRITE, fd, uintptr(unsafe.Pointer(&c.wp[c.wn])), uintptr(len(c.wp)-c.wn))
		switch e {
		case 0:
			c.wn += int(n)
		case syscall.EINTR:
		case syscall.EAGAIN:
			return false
		default:
			c.werr = e
			return true
		}
	}
	return true
}
