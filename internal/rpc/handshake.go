package rpc

import (
	"crypto/subtle"
	"fmt"
	"time"
)

const (
	// protocolVersion is the only version this package speaks.
	protocolVersion uint16 = 1

	helloMagic  = "CNPY"
	helloFixed  = len(helloMagic) + 2 + len(ClientID{}) + 2 // magic, version, client id, secret length
	welcomeSize = 2 + 4                                     // version, status

	// maxSecret is the longest secret a hello can carry.
	maxSecret = 1<<16 - 1

	// maxHelloFrame bounds the first frame on a connection, read before the
	// peer is authenticated.
	maxHelloFrame = headerSize + helloFixed + maxSecret
)

// hello is the first frame a client sends.
type hello struct {
	version uint16
	client  ClientID
	secret  []byte
}

// welcome is the server's answer to a hello.
type welcome struct {
	version uint16 // the version the server speaks
	status  uint32 // StatusOK, StatusUnauthenticated or StatusBadVersion
}

func appendHello(b []byte, h *hello) []byte {
	b = appendHeader(b, headerSize+helloFixed+len(h.secret), kindHello, 0, 0, 0)
	b = append(b, helloMagic...)
	b = le.AppendUint16(b, h.version)
	b = append(b, h.client[:]...)
	b = le.AppendUint16(b, uint16(len(h.secret)))
	return append(b, h.secret...)
}

// decodeHello decodes a hello frame's body. Only the magic and the version
// are read from a hello of another version: the rest is that version's
// business, and the server answers it with StatusBadVersion. The secret
// aliases body.
func decodeHello(body []byte) (hello, error) {
	var h hello
	f, err := decodeFrame(body)
	if err != nil {
		return h, err
	}
	if f.kind != kindHello {
		return h, fmt.Errorf("%w: kind %d where a hello belongs", errMalformed, f.kind)
	}
	b := f.payload
	if len(b) < len(helloMagic)+2 || string(b[:len(helloMagic)]) != helloMagic {
		return h, fmt.Errorf("%w: hello without magic", errMalformed)
	}
	h.version = le.Uint16(b[len(helloMagic):])
	if h.version != protocolVersion {
		return h, nil
	}
	b = b[len(helloMagic)+2:]
	if len(b) < len(h.client)+2 {
		return h, fmt.Errorf("%w: hello too short", errMalformed)
	}
	copy(h.client[:], b)
	n := int(le.Uint16(b[len(h.client):]))
	b = b[len(h.client)+2:]
	if len(b) != n {
		return h, fmt.Errorf("%w: hello secret of %d bytes followed by %d", errMalformed, n, len(b))
	}
	h.secret = b
	return h, nil
}

func appendWelcome(b []byte, w welcome) []byte {
	b = appendHeader(b, headerSize+welcomeSize, kindWelcome, 0, 0, 0)
	b = le.AppendUint16(b, w.version)
	return le.AppendUint32(b, w.status)
}

// decodeWelcome decodes a welcome frame's body.
func decodeWelcome(body []byte) (welcome, error) {
	var w welcome
	f, err := decodeFrame(body)
	if err != nil {
		return w, err
	}
	if f.kind != kindWelcome {
		return w, fmt.Errorf("%w: kind %d where a welcome belongs", errMalformed, f.kind)
	}
	if len(f.payload) != welcomeSize {
		return w, fmt.Errorf("%w: welcome of %d bytes", errMalformed, len(f.payload))
	}
	w.version = le.Uint16(f.payload)
	w.status = le.Uint32(f.payload[2:])
	return w, nil
}

// handshake reads the client's hello and answers it. It runs on the
// connection's reader goroutine before the writer goroutine exists, so it
// writes to the socket directly. It returns an error, and the caller closes
// the connection, unless the client may send calls.
func (c *conn) handshake() error {
	cfg := &c.srv.cfg
	if err := c.nc.SetDeadline(time.Now().Add(cfg.HandshakeTimeout)); err != nil {
		return fmt.Errorf("set handshake deadline: %w", err)
	}
	c.fr.max = maxHelloFrame
	body, _, err := c.fr.next()
	if err != nil {
		return fmt.Errorf("read hello: %w", err)
	}
	h, err := decodeHello(body)
	if err != nil {
		return fmt.Errorf("read hello: %w", err)
	}
	status := StatusOK
	switch {
	case h.version != protocolVersion:
		status = StatusBadVersion
	case cfg.Secret != "" && subtle.ConstantTimeCompare(h.secret, []byte(cfg.Secret)) != 1:
		status = StatusUnauthenticated
	}
	if _, err := c.nc.Write(appendWelcome(nil, welcome{version: protocolVersion, status: status})); err != nil {
		return fmt.Errorf("write welcome: %w", err)
	}
	if status != StatusOK {
		return fmt.Errorf("refused client %v (version %d): %w", h.client, h.version, &StatusError{Status: status})
	}
	if err := c.nc.SetDeadline(time.Time{}); err != nil {
		return fmt.Errorf("clear handshake deadline: %w", err)
	}
	c.client = h.client
	c.fr.max = cfg.MaxFrame
	return nil
}

// handshake sends the hello and reads the server's welcome. It runs on the
// dialing goroutine before the connection's reader and writer exist.
func (cn *clientConn) handshake(cfg *ClientConfig) error {
	if err := cn.nc.SetDeadline(time.Now().Add(cfg.DialTimeout)); err != nil {
		return fmt.Errorf("set handshake deadline: %w", err)
	}
	h := hello{version: protocolVersion, client: cfg.ClientID, secret: []byte(cfg.Secret)}
	if _, err := cn.nc.Write(appendHello(nil, &h)); err != nil {
		return fmt.Errorf("write hello: %w", err)
	}
	cn.fr.max = headerSize + welcomeSize
	body, _, err := cn.fr.next()
	if err != nil {
		return fmt.Errorf("read welcome: %w", err)
	}
	w, err := decodeWelcome(body)
	if err != nil {
		return fmt.Errorf("read welcome: %w", err)
	}
	if w.status != StatusOK {
		return fmt.Errorf("server refused (speaks version %d): %w", w.version, &StatusError{Status: w.status})
	}
	if w.version != protocolVersion {
		return fmt.Errorf("server accepted version %d, want %d: %w", w.version, protocolVersion, &StatusError{Status: StatusBadVersion})
	}
	if err := cn.nc.SetDeadline(time.Time{}); err != nil {
		return fmt.Errorf("clear handshake deadline: %w", err)
	}
	cn.fr.max = cfg.MaxFrame
	return nil
}
