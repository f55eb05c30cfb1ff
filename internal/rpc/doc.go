// Package rpc is Canopy's framed request/response transport over TCP.
//
// It moves opaque calls between a Client and a Server and knows nothing of
// what they mean: a method is a uint16, a payload is bytes, a status is a
// uint32. Services (the metadata service, the data service) define their
// methods and payload encodings on top of it.
//
// # Wire format
//
// All integers are little-endian. Every frame starts with a 4-byte length,
// the number of bytes that follow it, which must not exceed the receiver's
// MaxFrame (16 MiB by default). A fixed 16-byte header follows:
//
//	u32 length   bytes after this field
//	u8  kind     1 call, 2 reply, 3 hello, 4 welcome
//	u8  flags    bit 0: payload compressed; bit 1: forwarded; bit 2: token;
//	             bit 3: early (calls, version 5 on); the others must be 0
//	u16 method
//	u64 call id
//	u32 status   replies only; 0 in every other kind
//
// A call carries the caller's identity, then its payload:
//
//	u32 uid, u32 gid, u16 ngroups (at most 64), ngroups × u32 groups
//	payload      the rest of the frame
//
// A reply's payload follows the header directly; it echoes the call's
// method and id.
//
// A forwarded call (flag bit 1, protocol version 3 on) carries, between the
// header and the uid, the client id and call id of the client a router
// forwards it for; the server hands it to its Handler as that client's
// call (Call.Client, Call.ID) and replies under the header's call id. See
// Client.Forward.
//
// An early call (flag bit 3, protocol version 5 on) asks to be answered
// once its change is applied and ordered, before it is durable
// (Call.Early); the transport only carries the mark. A router does not
// pass it on: calls it forwards go unmarked.
//
// The first frame on a connection is the client's hello, answered by the
// server's welcome. In both, method, call id and status are 0:
//
//	hello:   "CNPY", u16 version (5), [16]byte client id,
//	         u16 secret length, secret bytes, u16 codecs offered,
//	         u16 token length, token bytes (version 4 on)
//	welcome: u16 version, u32 status, u16 codec chosen (if status is 0)
//
// The welcome's status is 0 when the connection may carry calls,
// StatusUnauthenticated when the secret is wrong or ServerConfig.Authenticate
// refuses the token, and StatusBadVersion when
// the server does not speak the client's version; after a refusal the server
// closes the connection without serving any call. Version 1, which both
// sides still speak, has no codecs in either frame; a client refused by a
// version 1 server dials again in version 1.
//
// # Compression and TLS
//
// On a connection whose welcome chose a codec (S2 or Zstandard), either side
// compresses payloads above its CompressAbove threshold (4 KiB by default)
// when that makes them smaller, and marks them with flag bit 0. A payload
// that would decompress beyond MaxFrame closes the connection. With TLS
// configured, the TLS handshake precedes the hello.
//
// A frame that cannot be decoded, is longer than MaxFrame or is of a kind
// the receiver does not expect closes the connection it came on, and only
// that one.
//
// # Statuses, retries and call ids
//
// Status 0 is success. Statuses below StatusTransport belong to the service
// and pass through untouched. Statuses from StatusTransport up belong to the
// transport; the Client turns them into a *StatusError. StatusBusy and
// StatusShuttingDown are retriable.
//
// A Client numbers its calls from a counter that never repeats for its
// lifetime and resends a retried call with the same id, so a server that
// remembers (client id, call id) pairs can recognise a retry of a call it
// already executed.
//
// A Server counts each client's connections by the client id of their
// hello; ServerConfig.OnClientGone tells the service when a client's last
// connection closed, so it can release what it held for that client.
//
// # Concurrency
//
// A connection carries many calls at once; replies come back in whatever
// order the server finishes them. Senders append encoded frames to the
// connection's pending output under a short lock. One goroutine at a time
// owns the socket's write side and sends all that has accumulated in a
// single write; frames added meanwhile go out with its next write or are
// handed to the connection's writer goroutine, never lost or reordered.
//
// The fast path takes no hand-off between goroutines. A Server's reader
// goroutine holds back the replies made while it works through the calls
// already read (those its handler answers inline and any others), and
// writes them itself once it has no complete call left to read, unless a
// write is in progress. A reply made elsewhere to the only call in flight
// is written by the goroutine making it; with more calls in flight, replies
// go to the writer goroutine, which gathers them into fewer writes. On a
// Client, a call made while no other is in flight is written by its caller,
// and a caller that finds nobody reading the connection reads it for its
// own reply, passing on the replies of others it meets, for a millisecond
// or two before it leaves the reading to the connection's reader goroutine
// and waits like other callers. So a lone caller's context, or the end of
// its attempt, may be noticed that much late. Busier connections go through
// the reader and writer goroutines.
//
// A Server hands each call to its Handler on the connection's reader
// goroutine, unless ServerConfig.Queues is set: readers then put calls on a
// bounded read or write queue, answering StatusBusy when it is full, and a
// pool of handler goroutines serves them, reads and writes in a set
// proportion while both queues hold calls.
//
// A router passes calls on with Client.Forward, which does not wait: the
// reply goes to a callback on the goroutine that reads it. A goroutine
// that works through many frames (a server's reader serving calls, a
// client's reader receiving replies) offers a Batch (Call.Batch, the
// callback's argument): the calls forwarded and replies sent through it
// wait, and leave in one write per connection, written by that goroutine,
// when it has nothing more buffered.
//
// Plain TCP connections (TLS ones too, underneath) read and write their
// sockets with raw system calls through the runtime's network poller
// (syscall.RawConn), which waits for readiness exactly as net.Conn does;
// deadlines and Close behave the same. The socket is non-blocking, so a
// call never holds its thread for long, and a raw call skips the
// scheduler's system-call bookkeeping: a process whose goroutines all wait
// between bursts of frames (a router, a client in a closed loop) otherwise
// wakes the runtime's monitor thread with the first read or write of every
// burst, a futex wake-up and a context switch each time, a fifth of a
// router's CPU. Builds with the race detector keep net.Conn's reads and
// writes, through which the detector sees the ordering a connection makes.
//
// A Client may limit its own call rate with a token bucket
// (ClientConfig.RateLimit), which every attempt waits on.
//
// # Metrics
//
// Given a Prometheus registerer, a Server exports:
//
//	canopy_rpc_connections                 gauge: connections open
//	canopy_rpc_calls_in_flight             gauge: calls received, not yet replied to
//	canopy_rpc_calls_total{method,status}  counter: replies, by status class
//	canopy_rpc_processing_seconds{method}  histogram: call decoded to reply queued
//	canopy_rpc_read_bytes_total            counter: bytes received, on the wire
//	canopy_rpc_written_bytes_total         counter: bytes sent, on the wire
//	canopy_rpc_frames_per_write            histogram: replies per socket write
//	canopy_rpc_decode_seconds              histogram: decoding a call frame
//	canopy_rpc_encode_seconds              histogram: encoding a reply frame
//
// and, with queues:
//
//	canopy_rpc_busy_refusals_total{class}  counter: calls refused, queue full
//	canopy_rpc_queue_length{class}         gauge: calls waiting
//	canopy_rpc_queue_wait_seconds{class}   histogram: time in the queue
//	canopy_rpc_handlers_busy               gauge: handlers serving a call
//
// A Client exports canopy_rpc_client_retries_total,
// canopy_rpc_client_busy_total and canopy_rpc_client_reconnects_total.
// Recording a call costs no allocation and no map lookup: per-method series
// are looked up in a table filled the first time a method is seen.
package rpc
