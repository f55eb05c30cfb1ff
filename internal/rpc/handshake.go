package rpc

import (
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"time"
)

const (
	// protocolVersion is the version this package speaks by preference.
	// Version 2 adds compression to version 1; version 3 adds forwarded
	// calls to version 2; version 4 adds the client's token to the hello;
	// version 5 adds early calls (flagEarly).
	protocolVersion uint16 = 5

	// minVersion is the oldest version it still speaks, with peers that
	// speak no newer one.
	minVersion uint16 = 1

	helloMagic  = "CNPY"
	helloFixed  = len(helloMagic) + 2 + len(ClientID{}) + 2 // magic, version, client id, secret length
	helloCodecs = 2                                         // version 2: codecs offered, after the secret
	helloToken  = 2                                         // version 4: token length, after the codecs
	welcomeSize = 2 + 4                                     // version, status
	welcomeV2   = welcomeSize + 2                           // version 2, accepted: and the codec chosen

	// maxSecret is the longest secret a hello can carry.
	maxSecret = 1<<16 - 1

	// MaxToken is the longest token a hello can carry.
	MaxToken = 1024

	// maxHelloFrame bounds the first frame on a connection, read before the
	// peer is authenticated.
	maxHelloFrame = headerSize + helloFixed + maxSecret + helloCodecs + helloToken + MaxToken

	// maxWelcomeFrame bounds the server's answer.
	maxWelcomeFrame = headerSize + welcomeV2
)

// hello is the first frame a client sends.
type hello struct {
	version uint16
	client  ClientID
	secret  []byte
	codecs  Codec  // the codecs the client accepts; version 2 on
	token   []byte // the client's credential token, or empty; version 4 on
}

// welcome is the server's answer to a hello.
type welcome struct {
	// version is the version the connection speaks; in a StatusBadVersion
	// refusal, the newest version the server speaks.
	version uint16
	status  uint32 // StatusOK, StatusUnauthenticated or StatusBadVersion
	codec   Codec  // the codec chosen, 0 for none; version 2 on, if accepted
}

// spoken reports whether this package speaks version v.
func spoken(v uint16) bool { return v >= minVersion && v <= protocolVersion }

func appendHello(b []byte, h *hello) []byte {
	size := headerSize + helloFixed + len(h.secret)
	if h.version >= 2 {
		size += helloCodecs
	}
	if h.version >= 4 {
		size += helloToken + len(h.token)
	}
	b = appendHeader(b, size, kindHello, 0, 0, 0, 0)
	b = append(b, helloMagic...)
	b = le.AppendUint16(b, h.version)
	b = append(b, h.client[:]...)
	b = le.AppendUint16(b, uint16(len(h.secret)))
	b = append(b, h.secret...)
	if h.version >= 2 {
		b = le.AppendUint16(b, uint16(h.codecs))
	}
	if h.version >= 4 {
		b = le.AppendUint16(b, uint16(len(h.token)))
		b = append(b, h.token...)
	}
	return b
}

// decodeHello decodes a hello frame's body. Only the magic and the version
// are read from a hello of a version this package does not speak: the rest
// is that version's business, and the server answers it with
// StatusBadVersion. The secret and the token alias body.
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
	if !spoken(h.version) {
		return h, nil
	}
	b = b[len(helloMagic)+2:]
	if len(b) < len(h.client)+2 {
		return h, fmt.Errorf("%w: hello too short", errMalformed)
	}
	copy(h.client[:], b)
	n := int(le.Uint16(b[len(h.client):]))
	b = b[len(h.client)+2:]
	rest := 0 // what follows the secret
	if h.version >= 2 {
		rest = helloCodecs
	}
	if h.version >= 4 {
		rest += helloToken
	}
	if len(b) < n+rest || h.version < 4 && len(b) != n+rest {
		return h, fmt.Errorf("%w: version %d hello with a secret of %d bytes followed by %d", errMalformed, h.version, n, len(b)-n)
	}
	h.secret = b[:n]
	if h.version >= 2 {
		h.codecs = Codec(le.Uint16(b[n:]))
	}
	if h.version >= 4 {
		t := int(le.Uint16(b[n+helloCodecs:]))
		b = b[n+rest:]
		if t > MaxToken || len(b) != t {
			return h, fmt.Errorf("%w: version %d hello with a token of %d bytes followed by %d", errMalformed, h.version, t, len(b))
		}
		h.token = b
	}
	return h, nil
}

// withCodec reports whether a welcome carries a codec: an acceptance, from
// version 2 on.
func (w welcome) withCodec() bool { return w.status == StatusOK && w.version >= 2 }

func appendWelcome(b []byte, w welcome) []byte {
	size := headerSize + welcomeSize
	if w.withCodec() {
		size = headerSize + welcomeV2
	}
	b = appendHeader(b, size, kindWelcome, 0, 0, 0, 0)
	b = le.AppendUint16(b, w.version)
	b = le.AppendUint32(b, w.status)
	if w.withCodec() {
		b = le.AppendUint16(b, uint16(w.codec))
	}
	return b
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
	if len(f.payload) < welcomeSize {
		return w, fmt.Errorf("%w: welcome of %d bytes", errMalformed, len(f.payload))
	}
	w.version = le.Uint16(f.payload)
	w.status = le.Uint32(f.payload[2:])
	want := welcomeSize
	if w.withCodec() {
		want = welcomeV2
	}
	if len(f.payload) != want {
		return w, fmt.Errorf("%w: version %d welcome with status %#x of %d bytes, want %d",
			errMalformed, w.version, w.status, len(f.payload), want)
	}
	if w.withCodec() {
		w.codec = Codec(le.Uint16(f.payload[welcomeSize:]))
	}
	return w, nil
}

// handshake completes the TLS handshake, if the server speaks TLS, then
// reads the client's hello and answers it. It runs on the connection's
// reader goroutine before the writer goroutine exists, so it writes to the
// socket directly. It returns an error, and the caller closes the
// connection, unless the client may send calls.
func (c *conn) handshake() error {
	cfg := &c.srv.cfg
	if err := c.nc.SetDeadline(time.Now().Add(cfg.HandshakeTimeout)); err != nil {
		return fmt.Errorf("set handshake deadline: %w", err)
	}
	var peer *x509.Certificate // the client's verified certificate, if any
	if tc, ok := c.nc.(*tls.Conn); ok {
		if err := tc.Handshake(); err != nil {
			return fmt.Errorf("tls handshake: %w", err)
		}
		if st := tc.ConnectionState(); len(st.VerifiedChains) > 0 && len(st.PeerCertificates) > 0 {
			peer = st.PeerCertificates[0]
		}
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
	w := welcome{version: h.version, status: StatusOK}
	var ident any
	var authErr error
	switch {
	case !spoken(h.version):
		w.version, w.status = protocolVersion, StatusBadVersion
	case cfg.Secret != "" && subtle.ConstantTimeCompare(h.secret, []byte(cfg.Secret)) != 1:
		w.status = StatusUnauthenticated
	default:
		switch {
		case len(h.token) == 0 && peer != nil && cfg.AuthenticateCert != nil:
			ident, authErr = cfg.AuthenticateCert(peer, c.nc.RemoteAddr())
		case cfg.Authenticate != nil:
			ident, authErr = cfg.Authenticate(h.token, c.nc.RemoteAddr())
		}
		if authErr != nil {
			w.status = StatusUnauthenticated
			break
		}
		if h.version >= 2 {
			w.codec = c.srv.comp.accept.choose(h.codecs)
		}
	}
	if _, err := c.nc.Write(appendWelcome(nil, w)); err != nil {
		return fmt.Errorf("write welcome: %w", err)
	}
	if authErr != nil {
		return fmt.Errorf("refused client %v: %w: %w", h.client, &StatusError{Status: w.status}, authErr)
	}
	if w.status != StatusOK {
		return fmt.Errorf("refused client %v (version %d): %w", h.client, h.version, &StatusError{Status: w.status})
	}
	if err := c.nc.SetDeadline(time.Time{}); err != nil {
		return fmt.Errorf("clear handshake deadline: %w", err)
	}
	c.client = h.client
	c.ident = ident
	c.codec = w.codec
	c.version = h.version
	c.fr.max = cfg.MaxFrame
	return nil
}

// handshake completes the TLS handshake, if the client speaks TLS, then
// sends a hello of the given version and reads the server's welcome, which
// it returns even when it refuses. It runs on the dialing goroutine before
// the connection's reader and writer exist.
func (cn *clientConn) handshake(cfg *ClientConfig, version uint16) (welcome, error) {
	var w welcome
	if err := cn.nc.SetDeadline(time.Now().Add(cfg.DialTimeout)); err != nil {
		return w, fmt.Errorf("set handshake deadline: %w", err)
	}
	if tc, ok := cn.nc.(*tls.Conn); ok {
		if err := tc.Handshake(); err != nil {
			return w, fmt.Errorf("tls handshake: %w", err)
		}
	}
	h := hello{version: version, client: cfg.ClientID, secret: []byte(cfg.Secret), codecs: cn.comp.accept, token: []byte(cfg.Token)}
	if _, err := cn.nc.Write(appendHello(nil, &h)); err != nil {
		return w, fmt.Errorf("write hello: %w", err)
	}
	cn.fr.max = maxWelcomeFrame
	body, _, err := cn.fr.next()
	if err != nil {
		return w, fmt.Errorf("read welcome: %w", err)
	}
	if w, err = decodeWelcome(body); err != nil {
		return w, fmt.Errorf("read welcome: %w", err)
	}
	if w.status != StatusOK {
		return w, fmt.Errorf("server refused version %d (speaks version %d): %w", version, w.version, &StatusError{Status: w.status})
	}
	if w.version != version {
		return w, fmt.Errorf("server accepted version %d, want %d: %w", w.version, version, &StatusError{Status: StatusBadVersion})
	}
	if w.codec != 0 && (w.codec&(w.codec-1) != 0 || w.codec&^h.codecs != 0) {
		return w, fmt.Errorf("read welcome: %w: server chose codec %v, offered %v", errMalformed, w.codec, h.codecs)
	}
	if err := cn.nc.SetDeadline(time.Time{}); err != nil {
		return w, fmt.Errorf("clear handshake deadline: %w", err)
	}
	cn.codec = w.codec
	cn.version = version
	if cfg.Early && version >= 5 {
		cn.early = flagEarly
	}
	cn.fr.max = cfg.MaxFrame
	return w, nil
}
